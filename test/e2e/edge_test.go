// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// The edge node of these tests and the receivers whose collections they count.
const edgeNode = "edge-1"

var edgeReceivers = []string{"task", "gpu"}

// TestEdgeZeroLoss is the edge promise end to end, on distro/agent.yaml and distro/gateway.yaml
// as they ship: an agent (simulated GPUs, a fixture host) pushes to a gateway that remote-writes
// into a real Prometheus. The gateway goes down; during the outage the agent keeps collecting,
// is stopped with SIGTERM and started again, then killed with SIGKILL and started again; then
// the gateway comes back. Every collection of every run of the agent must be in Prometheus.
//
// The test shortens what is about time (collection every second, backoffs, an outage of
// seconds) but not what decides delivery: retry until delivered, fsync, one consumer, the
// queue's bound all come from distro/agent.yaml. The outage outlasts the retry window that
// TestEdgeLossIsReported sets, which stands for the default 5 minutes scaled down alike.
func TestEdgeZeroLoss(t *testing.T) {
	lost := runEdgeOutage(t, remoteWritePath)
	assert.Empty(t, lost, "collections missing in Prometheus after the outage")
}

// TestEdgeLossIsReported is TestEdgeZeroLoss with a retry window shorter than the outage (what
// the exporter's default of 5 minutes does to a longer outage): the check must name the lost
// collections, or it could not fail.
func TestEdgeLossIsReported(t *testing.T) {
	lost := runEdgeOutage(t, remoteWritePath, "exporters::otlp_grpc/gateway::retry_on_failure::max_elapsed_time=2s")
	require.NotEmpty(t, lost, "a retry window shorter than the outage loses collections, and the check must see it")
	t.Logf("lost, as expected with a 2 s retry window:\n%s", strings.Join(lost, "\n"))
}

// runEdgeOutage plays the outage on the way into a store that path makes, and returns what the
// store lacks (see missingCollections).
func runEdgeOutage(t *testing.T, path storePath, agentSets ...string) []string {
	t.Helper()
	secrets, store, gateway := startEdgeStore(t, path)
	agent := stack.StartAgent(t, secrets, edgeAgentOptions(t, gateway, agentSets...))
	eventually(t, "the agent's first collections in Prometheus", func() bool {
		return store.count(t, fmt.Sprintf(`collector_iteration_count_total{node_name=%q, name="task"} >= 2`, edgeNode)) == 1
	})

	// What each run of the agent has collected at least, read from its own page just before it
	// is stopped (it may collect once more before the signal lands).
	var collected []map[string]int
	gateway.Process.Stop(syscall.SIGKILL)
	for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		collected = append(collected, waitCollectedMore(t, agent, 4))
		agent.Process = agent.Process.Restart(t, stop)
	}
	waitCollectedMore(t, agent, 4)
	gateway.Process = gateway.Process.StartAgain(t)
	waitHealthy(t, "the gateway, back", gateway.Health)

	// The backlog drains in order, so once a collection made after the gateway came back is in
	// Prometheus, everything before it has been delivered or dropped. The last run's count is
	// read before that moment: a collection made after it may still be on its way.
	collected = append(collected, collections(t, agent))
	waitDelivered(t, store, edgeNode, time.Now())
	return missingCollections(t, store.samples(t, fmt.Sprintf(`{node_name=%q}[1h]`, edgeNode)), collected)
}

// waitDelivered waits until a collection of each receiver that node made after since is in the
// store. The backlog drains in order, so then everything before it has been delivered or
// dropped.
func waitDelivered(tb testing.TB, store metricStore, node string, since time.Time) {
	tb.Helper()
	waitDrained(tb, fmt.Sprintf("a collection of %s made after %s in the store", node, since.Format(time.TimeOnly)), func() bool {
		for _, r := range edgeReceivers {
			q := fmt.Sprintf(`timestamp(collector_iteration_count_total{node_name=%q, name=%q}) > %d`, node, r, since.Unix())
			if store.count(tb, q) != 1 {
				return false
			}
		}
		return true
	})
}

// storePath starts a store and returns it with the --set flags that point distro/gateway.yaml
// at it.
type storePath func(tb testing.TB) (metricStore, []string)

// collectedBy is the receiver whose collections carry series s, by the producers the metric
// contract names (the way into the store may drop the scope's name: Prometheus' OTLP receiver
// does unless told otherwise, as the gateway's own page does). The gpu_attribution processor's
// series are made from each gpu batch and travel with it; a name both receivers produce says
// which in its name label. "" for target_info, which Prometheus' OTLP receiver makes of each
// resource's attributes.
func collectedBy(tb testing.TB, metrics *contract.Contract, s sampleSeries) string {
	tb.Helper()
	name := s.labels["__name__"]
	if name == "target_info" {
		return ""
	}
	m, ok := metrics.Lookup(name)
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if !ok && strings.HasSuffix(name, suffix) {
			m, ok = metrics.Lookup(strings.TrimSuffix(name, suffix))
		}
	}
	require.True(tb, ok, "%s: not in the contract", s)
	var from []string
	for _, component := range m.From {
		if component == "gpu_attribution" {
			component = "gpu"
		}
		if slices.Contains(edgeReceivers, component) && !slices.Contains(from, component) {
			from = append(from, component)
		}
	}
	if len(from) > 1 && slices.Contains(from, s.labels["name"]) {
		return s.labels["name"]
	}
	require.Len(tb, from, 1, "%s: from which receiver (the contract names %v)", s, m.From)
	return from[0]
}

// remoteWritePath is a Prometheus that takes remote write, configured as deploy/ ships
// Prometheus (no out_of_order_time_window, so a sample older than its series' newest is
// refused), and the gateway's prometheusremotewrite/store exporter in the pipeline
// docs/deployment.md shows ("Remote write into a store").
func remoteWritePath(tb testing.TB) (metricStore, []string) { return remoteWritePathWith("")(tb) }

// remoteWritePathWith is remoteWritePath with more of prometheus.yml (an out-of-order window).
func remoteWritePathWith(more string) storePath {
	return func(tb testing.TB) (metricStore, []string) {
		p := startPrometheusServer(tb, prometheusConfig{more: more, flags: []string{"--web.enable-remote-write-receiver"}})
		return p.metricStore, remoteWriteSets(p.base + "/api/v1/write")
	}
}

// remoteWriteSets put the gateway's prometheusremotewrite/store exporter, writing to url, in the
// pipeline docs/deployment.md shows ("Remote write into a store").
func remoteWriteSets(url string) []string {
	return []string{
		"exporters::prometheusremotewrite/store::endpoint=" + url,
		"service::pipelines::metrics/remote_write::receivers=[otlp]",
		"service::pipelines::metrics/remote_write::processors=[memory_limiter,resource/prometheus]",
		"service::pipelines::metrics/remote_write::exporters=[prometheusremotewrite/store]",
	}
}

// startEdgeStore starts the store of path and distro/gateway.yaml writing into it.
func startEdgeStore(tb testing.TB, path storePath) (*stack.Secrets, metricStore, *stack.Gateway) {
	tb.Helper()
	secrets := stack.NewSecrets(tb)
	store, sets := path(tb)
	gateway := stack.StartGateway(tb, secrets, sets...)
	waitHealthy(tb, "the gateway", gateway.Health)
	return secrets, store, gateway
}

// edgeAgentOptions play the edge node with simulated GPUs on a fixture host, collecting every
// second and retrying within a second: only what is about time is shortened.
func edgeAgentOptions(tb testing.TB, gateway *stack.Gateway, sets ...string) stack.AgentOptions {
	return simulatedAgentOptions(tb, gateway, edgeNode, "10.0.0.1", sets...)
}

// simulatedAgentOptions are edgeAgentOptions for node name at ip.
func simulatedAgentOptions(tb testing.TB, gateway *stack.Gateway, name, ip string, sets ...string) stack.AgentOptions {
	options := agentOptions(tb, gateway, name, ip)
	options.Sets = append(options.Sets,
		"receivers::gpu::backend=simulated",
		"receivers::gpu::scenario="+filepath.Join(repoRoot(tb), "distro", "scenarios", "dgx-a100-demo.yaml"),
		"exporters::otlp_grpc/gateway::retry_on_failure::initial_interval=100ms",
		"exporters::otlp_grpc/gateway::retry_on_failure::max_interval=500ms",
	)
	options.Sets = append(options.Sets, sets...)
	return options
}

// TestEdgeQueueFull fills the agent's queue while the gateway is down (its bound made small):
// the agent keeps running and serving its own page, refuses the newest collections and counts
// them in otelcol_exporter_enqueue_failed_metric_points; what it had queued, the oldest, is
// delivered when the gateway is back.
func TestEdgeQueueFull(t *testing.T) {
	secrets, store, gateway := startEdgeStore(t, remoteWritePath)
	gateway.Process.Stop(syscall.SIGKILL)
	agent := stack.StartAgent(t, secrets, edgeAgentOptions(t, gateway, "exporters::otlp_grpc/gateway::sending_queue::queue_size=300000"))

	refused := func() float64 {
		families, _, err := scrape(agent.Telemetry)
		if err != nil || families["otelcol_exporter_enqueue_failed_metric_points"] == nil {
			return 0
		}
		total := 0.0
		for _, m := range families["otelcol_exporter_enqueue_failed_metric_points"].GetMetric() {
			total += valueOf(m)
		}
		return total
	}
	eventually(t, "the full queue to refuse metric points", func() bool { return refused() > 0 })
	full := collections(t, agent)
	waitCollectedMore(t, agent, full["task"]+4)
	select {
	case <-agent.Process.Exited():
		t.Fatal("the agent exited with a full queue")
	default:
	}
	waitHealthy(t, "the agent with a full queue", agent.Health)

	gateway.Process = gateway.Process.StartAgain(t)
	back := time.Now()
	waitDrained(t, "a collection made after the gateway came back in Prometheus", func() bool {
		q := fmt.Sprintf(`timestamp(collector_iteration_count_total{node_name=%q, name="task"}) > %d`, edgeNode, back.Unix())
		return store.count(t, q) == 1
	})
	got := store.samples(t, fmt.Sprintf(`collector_iteration_count_total{node_name=%q}[1h]`, edgeNode))
	require.Len(t, got, len(edgeReceivers))
	gaps := 0
	for _, s := range got {
		assert.Equal(t, 1.0, s.values[0], "%s: the oldest collection is kept: %v", s, s.values)
		for i := 1; i < len(s.values); i++ {
			if s.values[i] != s.values[i-1]+1 {
				gaps++
			}
		}
	}
	assert.Positive(t, gaps, "collections refused while the queue was full are missing: %v", got)
}

// collections reads, from the agent's own page, how often each receiver has collected in this
// run.
func collections(tb testing.TB, agent *stack.Agent) map[string]int {
	tb.Helper()
	n := map[string]int{}
	eventually(tb, "the agent's collection counters", func() bool {
		families, _, err := scrape(agent.Metrics)
		if err != nil || families["collector_iteration_count_total"] == nil {
			return false
		}
		for _, m := range families["collector_iteration_count_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					n[l.GetValue()] = int(m.GetCounter().GetValue())
				}
			}
		}
		return n["task"] > 0 && n["gpu"] > 0
	})
	return n
}

// waitCollectedMore waits until every receiver of the agent's current run has collected more
// times than n, and returns how often each has.
func waitCollectedMore(tb testing.TB, agent *stack.Agent, n int) map[string]int {
	tb.Helper()
	var c map[string]int
	eventually(tb, fmt.Sprintf("more than %d collections of each receiver", n), func() bool {
		c = collections(tb, agent)
		return c["task"] > n && c["gpu"] > n
	})
	return c
}

// waitDrained is eventually with a deadline that also covers gRPC's reconnection backoff (it
// grows during the outage) and the drain of the backlog.
func waitDrained(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	poll.Until(tb, 3*time.Minute, what, cond)
}

// sample series: a series' labels and its samples' timestamps (ms) and values.
type sampleSeries struct {
	labels     map[string]string
	timestamps []int64
	values     []float64
}

func (s sampleSeries) String() string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.labels[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// missingCollections checks that every collection of every run is in Prometheus for every
// series, and describes each one that is not. A run of the agent is a stretch of
// collector_iteration_count_total{name=<receiver>} that counts up (the counter starts again
// from 1 with each process): within a run it must go 1, 2, ... with no step missing. Every other
// series of that receiver (collectedBy) must then have a sample for each collection of
// each run, but the run's first (a rate needs two readings). A sample that Prometheus refused
// (out of order, or a duplicate timestamp with another value) is a missing one.
//
// collected says, for each run, how many collections of each receiver it made at least.
func missingCollections(tb testing.TB, all []sampleSeries, collected []map[string]int) []string {
	tb.Helper()
	var lost []string
	runs := map[string][][]int64{} // receiver -> runs -> collection timestamps
	for _, s := range all {
		receiver := s.labels["name"]
		if s.labels["__name__"] != "collector_iteration_count_total" || !slices.Contains(edgeReceivers, receiver) {
			continue
		}
		var run []int64
		previous := 0.0
		for i, v := range s.values {
			if v <= previous { // a new process
				runs[receiver] = append(runs[receiver], run)
				run, previous = nil, 0
			}
			if v != previous+1 {
				lost = append(lost, fmt.Sprintf("%s: run %d: collection %v comes after %v", receiver, len(runs[receiver])+1, v, previous))
			}
			run, previous = append(run, s.timestamps[i]), v
		}
		runs[receiver] = append(runs[receiver], run)
		tb.Logf("%s collections in Prometheus: %v", receiver, s.values)
	}
	for _, r := range edgeReceivers {
		// The first run before the outage, then one after SIGTERM and one after SIGKILL.
		if len(runs[r]) != len(collected) {
			lost = append(lost, fmt.Sprintf("%s: %d runs of the agent in Prometheus, want %d", r, len(runs[r]), len(collected)))
			continue
		}
		for i, run := range runs[r] {
			if i < len(collected) && len(run) < collected[i][r] {
				lost = append(lost, fmt.Sprintf("%s: run %d: %d collections in Prometheus, the agent made %d", r, i+1, len(run), collected[i][r]))
			}
		}
	}
	metrics, err := contract.Load(filepath.Join(repoRoot(tb), "docs", "metrics.md"))
	require.NoError(tb, err)
	for _, s := range all {
		receiver := collectedBy(tb, metrics, s)
		if receiver == "" {
			continue
		}
		for i, run := range runs[receiver] {
			// A run's samples lie between its first collection and the next run's (a
			// measurement may be stamped a little before the collection's counter).
			from, to := run[0]-500, int64(math.MaxInt64)
			if next := runs[receiver][i+1:]; len(next) > 0 {
				to = next[0][0] - 500
			}
			have := 0
			for _, ts := range s.timestamps {
				if ts >= from && ts < to {
					have++
				}
			}
			if have < len(run)-1 {
				lost = append(lost, fmt.Sprintf("%s: run %d has %d samples of its %d collections", s, i+1, have, len(run)))
			}
		}
	}
	return lost
}

// metricStore is where the tests read back what reached a store: the prefix of its
// instant-query API (Prometheus' or Thanos Query's, which answers the same API), and the pages
// of the store's own metrics (one per process that takes writes).
type metricStore struct {
	api     string
	metrics []string
}

// counter sums counter name (with labels matching match) over the store's own metrics pages.
func (s metricStore) counter(tb testing.TB, name string, match map[string]string) float64 {
	tb.Helper()
	sum := 0.0
	for _, page := range s.metrics {
		sum += counterAt(tb, page, name, match)
	}
	return sum
}

// count is how many series an instant query returns (0 while the store does not answer).
func (s metricStore) count(tb testing.TB, q string) int { return series(tb, s.api, q) }

// samples runs a range-vector query and returns each series' raw samples.
func (s metricStore) samples(tb testing.TB, q string) []sampleSeries {
	tb.Helper()
	body, err := httpGet(s.api + url.QueryEscape(q))
	require.NoError(tb, err)
	var resp struct {
		Data struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(tb, json.Unmarshal(body, &resp))
	require.Equal(tb, "matrix", resp.Data.ResultType, q)
	out := make([]sampleSeries, len(resp.Data.Result))
	for i, r := range resp.Data.Result {
		out[i].labels = r.Metric
		for _, v := range r.Values {
			ts, ok := v[0].(float64)
			require.True(tb, ok, "timestamp %v", v[0])
			value, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
			require.NoError(tb, err)
			out[i].timestamps = append(out[i].timestamps, int64(ts*1000+0.5))
			out[i].values = append(out[i].values, value)
		}
	}
	return out
}

// TestEdgeCorruptQueue starts the agent on a queue directory whose metrics queue file a power
// cut left as garbage: the agent starts, says so, moves the file aside, and delivers to the
// gateway. Without distro/agent.yaml's file_storage_check the same start fails (what contrib's
// file_storage does on its own, recreate or not), so the test sees the difference.
func TestEdgeCorruptQueue(t *testing.T) {
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets)
	waitHealthy(t, "the gateway", gateway.Health)
	corruptQueue := func() string {
		dir := filepath.Join(t.TempDir(), "queue")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		file := filepath.Join(dir, "exporter_otlp_grpc_gateway_metrics")
		require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("left by a power cut\n", 4096)), 0o600))
		return dir
	}

	t.Run("without-the-check", func(t *testing.T) {
		options := agentOptions(t, gateway, "unchecked", "10.0.0.2")
		options.QueueDir = corruptQueue()
		options.Sets = append(options.Sets, "service::extensions=[health_check, bearertokenauth/gateway, file_storage/queue]")
		agent := stack.StartAgent(t, secrets, options)
		eventually(t, "the agent without the check to exit", func() bool {
			select {
			case <-agent.Process.Exited():
				return true
			default:
				return false
			}
		})
		assert.Contains(t, agent.Process.Output(), "invalid database")
	})

	options := agentOptions(t, gateway, edgeNode, "10.0.0.1")
	options.QueueDir = corruptQueue()
	agent := stack.StartAgent(t, secrets, options)
	waitHealthy(t, "the agent on a corrupt queue", agent.Health)
	eventually(t, "the agent's series on the gateway", func() bool {
		body, err := httpGet(gateway.Metrics)
		return err == nil && strings.Contains(string(body), fmt.Sprintf("node_name=%q", edgeNode))
	})
	assert.Contains(t, agent.Process.Output(), "A persistent queue file was corrupt and is moved aside")
	aside, err := filepath.Glob(filepath.Join(options.QueueDir, "exporter_otlp_grpc_gateway_metrics.corrupt-*"))
	require.NoError(t, err)
	assert.Len(t, aside, 1, "the corrupt file is kept beside the queue for a post-mortem")
}
