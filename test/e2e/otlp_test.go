// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// prometheusOTLPPath is Prometheus 3 taking OTLP, configured with deploy/prometheus/otlp.yaml,
// and the gateway with deploy/components/prometheus-otlp's flags, pointed at it.
func prometheusOTLPPath(tb testing.TB) (metricStore, []string) {
	tb.Helper()
	p := startPrometheusServer(tb, prometheusConfig{
		more:  string(mustRead(tb, filepath.Join(repoRoot(tb), "deploy", "prometheus", "otlp.yaml"))),
		flags: []string{"--web.enable-otlp-receiver"},
	})
	return p.metricStore, append(componentSets(tb, "prometheus-otlp"),
		"exporters::otlp_http/prometheus::metrics_endpoint="+p.base+"/api/v1/otlp/v1/metrics")
}

// componentSets are the --set flags that deploy/components/<name> adds to the gateway's
// arguments, so that a test runs the component as it ships.
func componentSets(tb testing.TB, name string) []string {
	tb.Helper()
	return stack.KustomizeSets(tb, filepath.Join(repoRoot(tb), "deploy", "components", name, "kustomization.yaml"))
}

// TestEdgeZeroLossPrometheusOTLP is TestEdgeZeroLoss with the gateway sending OTLP into
// Prometheus 3 as deploy/ ships that path: every collection of every run of the agent lands.
func TestEdgeZeroLossPrometheusOTLP(t *testing.T) {
	lost := runEdgeOutage(t, prometheusOTLPPath)
	assert.Empty(t, lost, "collections missing in Prometheus after the outage")
}

// TestStoresMatchScrape sends the same agents' data through one gateway each way deploy/
// ships: its page, scraped by the otelcol-gpu job of deploy/prometheus/scrape-configs.yaml
// (honor_labels); OTLP into Prometheus 3 configured with deploy/prometheus/otlp.yaml
// (deploy/components/prometheus-otlp's flags); and remote write (the pipeline of docs/deployment.md,
// "Remote write into a store", as the scale-out overlay has it) into Thanos Receive, read through Thanos
// Query. Each Prometheus evaluates the shipped rules and scrapes the collectors' telemetry jobs.
// Every query of the dashboards (variables filled from the scrape path), every OpenPAI query,
// every recording rule and ALERTS must return the same series on the OTLP path and on Thanos
// Query as on the scrape path: names, labels, each node's instance, but for the tenant_id label
// Thanos Receive adds. Thanos evaluates the rules in Thanos Ruler through Query, as the scale-out
// overlay's README says to run them, and the scenario's XID 79 fires GpuXidRebootRequired there
// (a recording rule with offset 1h, read back through Query by the alert). The agents run on the
// fixture host with the simulated GPUs of the demo's scenario, so that the GPU, task and node
// queries have data.
func TestStoresMatchScrape(t *testing.T) {
	root := repoRoot(t)
	secrets := stack.NewSecrets(t)
	rules := ruleFiles(t)
	thanos := stack.StartThanos(t, stack.ThanosOptions{Receivers: 1, ReplicationFactor: 1, RuleFiles: rules})
	// The OTLP path's Prometheus starts once the collectors' telemetry endpoints are known; the
	// gateway's writes fail until then and go back to the agents, which retry.
	otlpPort := stack.FreePort(t)
	sets := append(componentSets(t, "prometheus-otlp"),
		fmt.Sprintf("exporters::otlp_http/prometheus::metrics_endpoint=http://127.0.0.1:%d/api/v1/otlp/v1/metrics", otlpPort),
		// The page as well, for the scrape path to read the same batches, in pipelines of its own
		// as distro/gateway.yaml has them (no resource/prometheus).
		"service::pipelines::metrics/page::receivers=[otlp]",
		"service::pipelines::metrics/page::processors=[memory_limiter]",
		"service::pipelines::metrics/page::exporters=[prometheus_page]",
		"service::pipelines::metrics/gpu_health_page::receivers=[k8s_gpu_health]",
		"service::pipelines::metrics/gpu_health_page::exporters=[prometheus_page]",
		"service::pipelines::metrics/gpu_health_store::receivers=[k8s_gpu_health]",
		"service::pipelines::metrics/gpu_health_store::processors=[resource/prometheus]",
		"service::pipelines::metrics/gpu_health_store::exporters=[prometheusremotewrite/store]")
	sets = append(sets, remoteWriteSets(thanos.Receivers[0].WriteURL)...)
	gateway := stack.StartGateway(t, secrets, sets...)
	waitHealthy(t, "the gateway", gateway.Health)
	pods := []pod{{"gateway", "otelcol-gpu-gateway-0", "node-a", gateway.Endpoints}}
	// Every fault of the demo's scenario within seconds, for the alerts to compare, and the
	// demo's jobs holding the GPUs, for the report's.
	scenario := filepath.Join(root, "test", "e2e", "testdata", "demo-compressed.yaml")
	demoNode := startDemoNode(t, scenario, filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"))
	// The report's period starts before the first collection.
	reportStart := time.Now().Truncate(time.Second)
	for ip, name := range map[string]string{"10.0.0.1": "node-a", "10.0.0.11": "node-b"} {
		agent := stack.StartAgent(t, secrets, simulatedAgentOptions(t, gateway, name, ip,
			"receivers::gpu::scenario="+scenario, "processors::gpu_attribution::root_path="+demoNode))
		pods = append(pods, pod{"agent", "otelcol-gpu-agent-" + name, name, agent.Endpoints})
	}

	jobs := shippedScrapeConfigs(t, pods)
	scraped := startPrometheusWith(t, scrapeConfigsYAML(t, jobs), rules...)
	// The OTLP path's Prometheus scrapes the telemetry jobs only (otlp.yaml: drop otelcol-gpu).
	telemetry := slices.DeleteFunc(slices.Clone(jobs), func(job map[string]any) bool { return job["job_name"] == "otelcol-gpu" })
	require.Len(t, telemetry, len(jobs)-1)
	otlp := startPrometheusServer(t, prometheusConfig{
		port:          otlpPort,
		more:          string(mustRead(t, filepath.Join(root, "deploy", "prometheus", "otlp.yaml"))),
		flags:         []string{"--web.enable-otlp-receiver"},
		ruleFiles:     rules,
		scrapeConfigs: scrapeConfigsYAML(t, telemetry),
	})
	viaScrape := monitoredCluster{api: scraped, base: strings.TrimSuffix(scraped, "/api/v1/query?query=")}
	viaOTLP := monitoredCluster{api: otlp.api, base: otlp.base}
	viaThanos := monitoredCluster{api: thanos.Query + "/api/v1/query?query=", base: thanos.Query}

	// Each has every node's GPU, task and node series and the rules' before the comparison
	// starts; then every query must come to agree (a series may reach one a moment before the
	// other).
	for _, mc := range []monitoredCluster{viaScrape, viaOTLP, viaThanos} {
		eventually(t, "both nodes' series on "+mc.base, func() bool {
			return series(t, mc.api, `count by (instance, node_name) (gpu_utilization)`) == 2 &&
				series(t, mc.api, `count by (instance) (task_cpu_percent)`) == 2 &&
				series(t, mc.api, `count by (instance) (node_memory_MemTotal_bytes)`) == 2 &&
				series(t, mc.api, `node:gpu_devices_detected:count`) == 2
		})
	}
	var queries []string
	for _, target := range dashboardTargets(t, viaScrape) {
		queries = append(queries, target.expr)
	}
	fill := platformFill(t, viaScrape)
	for _, pq := range platformQueries {
		queries = append(queries, fill.Replace(pq.query))
	}
	// The rules' own series and alerts too: the same rules fire on the same series.
	queries = append(append(queries, recordedRules...), "ALERTS")
	// The gateway's own series (the GPU health writer's) carry the instance of the scrape of its
	// page; resource/prometheus gives them <pod IP>:9102, the page's port in deploy/, which here is
	// another.
	page := hostPort(gateway.Metrics)
	asDeployed := func(labels string) string {
		return strings.ReplaceAll(labels, "instance:"+page, "instance:127.0.0.1:9102")
	}
	t.Run("otlp", func(t *testing.T) {
		sameSeries(t, viaScrape, viaOTLP, queries, asDeployed, func(labels string) string { return labels })
	})
	t.Run("thanos", func(t *testing.T) {
		eventually(t, "GpuXidRebootRequired firing for GPU 3 of each node in Thanos Ruler", func() bool {
			return series(t, viaThanos.api, `ALERTS{alertname="GpuXidRebootRequired", alertstate="firing", minor_number="3", xid="79"}`) == 2
		})
		// The collectors' up series are a scrape's: no scrape of them writes into the store, so
		// the rules over them (otelcol_gpu:*:up, collector.yaml) have nothing to read there and
		// belong in the Prometheus that scrapes the collectors' telemetry.
		var stored []string
		for _, q := range queries {
			if strings.Contains(q, "otelcol_gpu:") {
				assert.Positive(t, series(t, viaScrape.api, q), q)
				assert.Zero(t, series(t, viaThanos.api, q), q)
				continue
			}
			stored = append(stored, q)
		}
		require.Len(t, stored, len(queries)-2)
		sameSeries(t, viaScrape, viaThanos, stored, asDeployed, func(labels string) string {
			return strings.Replace(labels, " tenant_id:default-tenant", "", 1)
		})
	})
	// The report reads raw samples: on Thanos Query it must come out the same as on the OTLP
	// path's Prometheus, which holds the same samples (the gateway's, at their collection
	// times), every file byte for byte. On the scrape path the samples are the scrapes', at
	// their own times from the first scrape on: the hours differ (and a GPU a job held only
	// before it, as GPU 3, lost 5 s in, is not the job's there); the jobs, their users, and
	// every count of the GPUs are the same.
	t.Run("report", func(t *testing.T) {
		reportEnd := time.Now().Truncate(time.Second)
		for _, node := range []string{"node-a", "node-b"} {
			waitDelivered(t, otlp.metricStore, node, reportEnd)
			waitDelivered(t, thanosStore(thanos), node, reportEnd)
		}
		want := runReport(t, otlp.base, reportStart, reportEnd)
		got := runReport(t, thanos.Query, reportStart, reportEnd)
		assert.Equal(t, want, got)
		require.Contains(t, want, "gpus.csv")
		// Both nodes' 8 GPUs, the XIDs 13 and 79 of each, and the demo's 5 jobs on them.
		assert.Equal(t, 1+2*8, strings.Count(want["gpus.csv"], "\n"), want["gpus.csv"])
		assert.Equal(t, 1+2*2, strings.Count(want["xids.csv"], "\n"), want["xids.csv"])
		assert.Equal(t, 1+5, strings.Count(want["jobs.csv"], "\n"), want["jobs.csv"])
		scraped := runReport(t, viaScrape.base, reportStart, reportEnd)
		assert.Equal(t, want["xids.csv"], scraped["xids.csv"])
		gpuColumns := []string{
			"node_name", "minor_number", "uuid", "xids", "ecc_single_bit", "ecc_double_bit",
			"retired_pages", "remapped_rows", "remap_pending", "remap_failed",
		}
		assert.Equal(t, csvColumns(t, want["gpus.csv"], gpuColumns...), csvColumns(t, scraped["gpus.csv"], gpuColumns...))
		jobColumns := []string{"name", "username", "virtual_cluster"}
		assert.Equal(t, csvColumns(t, want["jobs.csv"], jobColumns...), csvColumns(t, scraped["jobs.csv"], jobColumns...))
	})
}

// csvColumns are the named columns of a CSV file of the report, header included.
func csvColumns(tb testing.TB, text string, names ...string) [][]string {
	tb.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	require.NoError(tb, err)
	require.NotEmpty(tb, rows)
	out := make([][]string, len(rows))
	for _, name := range names {
		i := slices.Index(rows[0], name)
		require.GreaterOrEqual(tb, i, 0, "column %s in %v", name, rows[0])
		for r, row := range rows {
			out[r] = append(out[r], row[i])
		}
	}
	return out
}

// runReport runs the GPU efficiency report (bin/gpureport) on the Prometheus HTTP API at base
// for [start, end) and returns the files it wrote, by name.
func runReport(tb testing.TB, base string, start, end time.Time) map[string]string {
	tb.Helper()
	out := tb.TempDir()
	run(tb, stack.ReportBinary(tb), "-prometheus", base, "-out", out,
		"-start", start.Format(time.RFC3339), "-end", end.Format(time.RFC3339))
	entries, err := os.ReadDir(out)
	require.NoError(tb, err)
	files := map[string]string{}
	for _, e := range entries {
		files[e.Name()] = string(mustRead(tb, filepath.Join(out, e.Name())))
	}
	return files
}

// sameSeries waits until every query returns the same series (each written out by one of the
// normalising functions) on want and on got, and fails naming those that do not.
func sameSeries(t *testing.T, want, got monitoredCluster, queries []string, wantAs, gotAs func(string) string) {
	t.Helper()
	withData := 0
	poll.UntilNoError(t, time.Minute, "every query to return the same series on both paths", func() error {
		var differ []string
		withData = 0
		for _, q := range queries {
			a, b := resultLabels(t, want.api, q), resultLabels(t, got.api, q)
			for i := range a {
				a[i] = wantAs(a[i])
			}
			for i := range b {
				b[i] = gotAs(b[i])
			}
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				differ = append(differ, fmt.Sprintf("%s\n  scrape: %v\n  other:  %v", q, a, b))
			}
			if len(a) > 0 {
				withData++
			}
		}
		if len(differ) > 0 {
			return fmt.Errorf("%d of %d queries differ:\n%s", len(differ), len(queries), strings.Join(differ, "\n"))
		}
		return nil
	})
	t.Logf("%d queries, %d of them with data, compared", len(queries), withData)
	// Most queries have data: the comparison is not one of empty answers.
	assert.Greater(t, withData, len(queries)/2)
}

// resultLabels runs an instant query and returns its series' label sets, each written out and
// sorted, for a comparison.
func resultLabels(tb testing.TB, api, q string) []string {
	tb.Helper()
	var out []string
	for _, labels := range query(tb, api, q) {
		out = append(out, fmt.Sprint(labels)) // fmt sorts a map's keys
	}
	slices.Sort(out)
	return out
}
