// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestDemoJobRecords: the demo node's collector sends its jobs to a gateway on
// distro/gateway.yaml; when its jobs end (the node's collector stops: every job's series stop)
// the gateway writes one record per job into its file (what gpureport -job-records reads: its
// unit tests read and cost such lines). The records' values are checked against the demo's scenario: GPU-hours
// are the GPUs times the time between the first and last collection, and GPU 7's energy is its
// constant 60 W over that time, within one collection.
func TestDemoJobRecords(t *testing.T) {
	root := repoRoot(t)
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets,
		"connectors::job_record::end_after=5s",
		"connectors::job_record::check_interval=1s",
	)
	waitHealthy(t, "the gateway", gateway.Health)
	_, demo := startDemo(t, filepath.Join(root, "distro", "scenarios", "dgx-a100-demo.yaml"),
		filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task::collection_interval=1s",
		"receivers::task/demo::collection_interval=1s",
		"processors::gpu_attribution::refresh_interval=1s",
		"processors::gpu_attribution::pod_resources::timeout=500ms",
		"extensions::bearertokenauth/gateway::filename="+secrets.AgentToken,
		"exporters::otlp_grpc/gateway::endpoint="+gateway.OTLP,
		"exporters::otlp_grpc/gateway::tls::ca_file="+secrets.AgentCA,
		"exporters::otlp_grpc/gateway::auth::authenticator=bearertokenauth/gateway",
		"service::extensions=[health_check,bearertokenauth/gateway]",
		"service::pipelines::metrics::exporters=[prometheus_page,otlp_grpc/gateway]",
	)
	eventually(t, "the demo's jobs on the gateway's page", func() bool {
		families, _, err := scrape(gateway.Metrics)
		if err != nil {
			return false
		}
		f, ok := families["task_gpu_mem_percent"]
		return ok && len(f.GetMetric()) >= 6
	})
	time.Sleep(10 * time.Second) // ten collections
	demo.Stop(syscall.SIGTERM)

	byJob := map[string]jobrecord.Record{}
	eventually(t, "a record of each demo job in the gateway's file", func() bool {
		content, err := os.ReadFile(gateway.JobRecords)
		if err != nil {
			return false
		}
		clear(byJob)
		var u plog.JSONUnmarshaler
		for line := range strings.Lines(string(content)) {
			ld, err := u.UnmarshalLogs([]byte(line))
			require.NoError(t, err, "the file exporter's line")
			for _, rl := range ld.ResourceLogs().All() {
				for _, sl := range rl.ScopeLogs().All() {
					for _, lr := range sl.LogRecords().All() {
						r, err := jobrecord.FromLogRecord(lr)
						require.NoError(t, err)
						require.NotContains(t, byJob, r.Job["job_name"], "one record per job")
						byJob[r.Job["job_name"]] = r
					}
				}
			}
		}
		return len(byJob) >= 6
	})
	// erin~sweep: the container of a gone pod, which holds GPU 4 as a task until zombie_after
	// (5 minutes) makes it a zombie.
	assert.ElementsMatch(t, []string{"alice~resnet50", "bob~explore", "notebooks/carol-jupyter", "dave~bert-infer", "frank~llm-eval", "erin~sweep"}, keys(byJob))

	const collection = time.Second
	alice := byJob["alice~resnet50"]
	assert.Equal(t, "alice", alice.User)
	require.Len(t, alice.GPUs, 4)
	lasted := alice.End.Sub(alice.Start)
	assert.GreaterOrEqual(t, lasted, 8*time.Second)
	assert.InDelta(t, 4*lasted.Hours(), alice.HeldHours, 4*collection.Hours(), "4 GPUs for the job's time")
	assert.InDelta(t, alice.HeldHours, alice.AllocatedHours, 1e-9, "alone on its GPUs")
	require.Len(t, alice.Models(), 1, "gpu_info's model, which job-cost.yaml prices")
	assert.NotEmpty(t, alice.Models()[0])
	assert.Positive(t, alice.UtilizationMean)

	frank := byJob["frank~llm-eval"]
	held := time.Duration(frank.HeldHours * float64(time.Hour))
	assert.InDelta(t, 60*held.Seconds(), frank.EnergyJoules, 60*collection.Seconds(), "GPU 7 draws a constant 60 W")
	assert.Equal(t, "idle", frank.Verdict)

	bob := byJob["bob~explore"]
	assert.InDelta(t, bob.HeldHours/2, bob.AllocatedHours, 1e-9, "GPU 5 time-sliced between two notebooks")
	dave := byJob["dave~bert-infer"]
	require.Len(t, dave.GPUs, 1)
	assert.NotEmpty(t, dave.GPUs[0].MIGUUID)
	assert.Less(t, dave.AllocatedHours, dave.HeldHours, "a MIG slice is a share of its GPU")
	t.Logf("alice~resnet50: %s to %s, %.6f GPU-h held, %.0f J; frank~llm-eval: %.6f GPU-h, %.1f J (60 W × %.1f s = %.1f J)",
		alice.Start.Format(time.RFC3339Nano), alice.End.Format(time.RFC3339Nano), alice.HeldHours, alice.EnergyJoules,
		frank.HeldHours, frank.EnergyJoules, held.Seconds(), 60*held.Seconds())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
