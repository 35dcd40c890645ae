// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// BenchmarkEdgeQueue measures how much of the persistent queue one collection takes on a node
// with 8 GPUs (the simulated DGX A100) and 200 job containers (hostfixture.Busy's fake host),
// with the gateway unreachable so that everything stays queued, one receiver at a time; and
// from that and distro/agent.yaml's intervals and bound, the hours of outage the queue holds.
//
//	OTELCOL_BIN=bin/otelcol-gpu go test -tags e2e -run '^$' -bench BenchmarkEdgeQueue -benchtime 1x ./test/e2e/
func BenchmarkEdgeQueue(b *testing.B) {
	shipped := shippedAgentQueue(b)
	host := filepath.Join(b.TempDir(), "host")
	require.NoError(b, hostfixture.Write(host, hostfixture.Busy(2, 200)))
	secrets := stack.NewSecrets(b)
	perHour := 0.0
	for _, receiver := range edgeReceivers {
		queueDir := filepath.Join(b.TempDir(), "queue")
		agent := stack.StartAgent(b, secrets, stack.AgentOptions{
			NodeName: edgeNode, NodeIP: "10.0.0.1", RootPath: host, QueueDir: queueDir,
			Gateway: fmt.Sprintf("127.0.0.1:%d", stack.FreePort(b)), // nothing listens there
			Sets: []string{
				"receivers::task::collection_interval=1s",
				"receivers::gpu::collection_interval=1s",
				"receivers::gpu::backend=simulated",
				"receivers::gpu::scenario=" + filepath.Join(repoRoot(b), "distro", "scenarios", "dgx-a100-demo.yaml"),
				"receivers::gpu::configured_gpu_count=8",
				"service::pipelines::metrics/gateway::receivers=[" + receiver + "]",
			},
		})
		// The first collection lacks rates; count from the second on.
		first := waitCollectedMore(b, agent, 1)[receiver]
		queuedFirst := queueBytes(b, agent)
		last := waitCollectedMore(b, agent, first+10)[receiver]
		queued := queueBytes(b, agent)
		perCollection := (queued - queuedFirst) / float64(last-first)
		interval := shipped.intervals[receiver]
		perHour += perCollection * float64(time.Hour/interval)
		b.ReportMetric(perCollection, receiver+"_bytes/collection")
		agent.Process.Stop(9)
		onDisk := 0.0
		entries, err := os.ReadDir(queueDir)
		require.NoError(b, err)
		for _, e := range entries {
			info, err := e.Info()
			require.NoError(b, err)
			onDisk += float64(info.Size())
		}
		b.ReportMetric(onDisk/queued, receiver+"_disk/queued")
	}
	b.ReportMetric(perHour, "queued_bytes/hour")
	b.ReportMetric(shipped.bound/perHour, "hours_in_shipped_queue")
}

// queueBytes reads the agent's otelcol_exporter_queue_size for its metrics queue (bytes, the
// shipped sizer), once it is settled between two collections.
func queueBytes(tb testing.TB, agent *stack.Agent) float64 {
	tb.Helper()
	var size float64
	eventually(tb, "the agent's queue size", func() bool {
		families, _, err := scrape(agent.Telemetry)
		if err != nil || families["otelcol_exporter_queue_size"] == nil {
			return false
		}
		for _, m := range families["otelcol_exporter_queue_size"].GetMetric() {
			if labelsOf(m, "exporter", "service_instance_id", "service_name", "service_version") == "data_type=metrics" {
				size = valueOf(m)
				return true
			}
		}
		return false
	})
	return size
}

type agentQueue struct {
	intervals map[string]time.Duration
	bound     float64
}

// shippedAgentQueue reads the collection intervals and the queue's bound from distro/agent.yaml.
func shippedAgentQueue(tb testing.TB) agentQueue {
	tb.Helper()
	var cfg struct {
		Receivers map[string]struct {
			CollectionInterval time.Duration `yaml:"collection_interval"`
		} `yaml:"receivers"`
		Exporters map[string]struct {
			SendingQueue struct {
				Sizer     string  `yaml:"sizer"`
				QueueSize float64 `yaml:"queue_size"`
			} `yaml:"sending_queue"`
		} `yaml:"exporters"`
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(tb), "distro", "agent.yaml"))
	require.NoError(tb, err)
	require.NoError(tb, yaml.Unmarshal(raw, &cfg))
	q := cfg.Exporters["otlp_grpc/gateway"].SendingQueue
	require.Equal(tb, "bytes", q.Sizer)
	out := agentQueue{intervals: map[string]time.Duration{}, bound: q.QueueSize}
	for _, r := range edgeReceivers {
		out.intervals[r] = cfg.Receivers[r].CollectionInterval
		require.Positive(tb, out.intervals[r], r)
	}
	return out
}
