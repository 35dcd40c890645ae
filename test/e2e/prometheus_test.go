// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// contractNames are the node, task, service and process names of the metric contract
// (docs/metrics.md) that the task receiver produces.
var contractNames = []string{
	"node_uname_info", "node_cpu_seconds_total",
	"node_memory_MemTotal_bytes", "node_memory_MemFree_bytes", "node_memory_MemAvailable_bytes",
	"node_memory_Buffers_bytes", "node_memory_Cached_bytes",
	"node_network_receive_bytes_total", "node_network_transmit_bytes_total",
	"node_disk_read_bytes_total", "node_disk_written_bytes_total",
	"node_filesystem_avail_bytes", "node_filesystem_size_bytes", "node_load1",
	"task_cpu_percent", "task_cpu_seconds_total", "task_mem_usage_byte", "task_mem_limit_byte",
	"task_mem_usage_percent", "task_net_in_byte", "task_net_out_byte",
	"task_network_receive_bytes_total", "task_network_transmit_bytes_total",
	"task_block_in_byte", "task_block_out_byte",
	"service_cpu_percent", "service_cpu_seconds_total", "service_mem_usage_byte", "service_mem_limit_byte",
	"service_mem_usage_percent", "service_net_in_byte", "service_net_out_byte",
	"service_network_receive_bytes_total", "service_network_transmit_bytes_total",
	"service_block_in_byte", "service_block_out_byte",
	"zombie_process_count", "process_mem_usage_byte", "collector_iteration_count_total",
}

// TestPrometheusScrapes has a real Prometheus scrape two collectors started from
// distro/local.yaml: one on this machine, one on a fixture host with jobs, a service, processes
// in state D and a large process. Every contract name must be queryable wherever the collector
// exposes it, and on the fixture host every one of them must be there.
func TestPrometheusScrapes(t *testing.T) {
	root := repoRoot(t)
	local := filepath.Join(root, "distro", "local.yaml")
	machine := startCollector(t, local, "receivers::task::collection_interval=1s")
	fixture := startCollector(t, local,
		"receivers::task::collection_interval=1s",
		"receivers::task::root_path="+filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", "v1-systemd-containerd"),
		"receivers::task::service_namespaces=[pai]",
	)

	api := startPrometheus(t, map[string]string{"machine": machine, "fixture": fixture})

	// Rates need two collections; wait until Prometheus has the fixture's task_cpu_percent.
	eventually(t, "Prometheus to have scraped both collectors", func() bool {
		return series(t, api, `task_cpu_percent{job="fixture"}`) > 0 && series(t, api, `node_load1{job="machine"}`) > 0
	})
	exposed, _, err := scrape(machine)
	require.NoError(t, err)

	for _, name := range contractNames {
		t.Run(name, func(t *testing.T) {
			assert.Positive(t, series(t, api, fmt.Sprintf(`%s{job="fixture"}`, name)), "fixture host")
			// This machine's series may have gone since the page was read (process_mem_usage_byte
			// follows whichever processes are above 500 MiB now): any sample in the last minutes.
			if exposed[name] != nil || strings.HasPrefix(name, "node_") {
				eventually(t, name+" on this machine", func() bool {
					return series(t, api, fmt.Sprintf(`last_over_time(%s{job="machine"}[10m])`, name)) > 0
				})
			}
		})
	}
	// make run's GPU source is there whether or not this machine has the NVIDIA driver.
	assert.Equal(t, 1, series(t, api, `gpu_nvml_up{job="machine"}`))
	// Labels as dashboards select them.
	assert.Equal(t, 1, series(t, api, `task_mem_usage_byte{job="fixture",job_name="carol~llama-ft",username="carol",role_name="trainer",task_index="3",virtual_cluster="default"}`))
	assert.Equal(t, 1, series(t, api, `task_mem_usage_byte{job="fixture",job_name="carol~llama-ft",namespace="default",pod_name="llama-ft-trainer-3",container_name="trainer"}`), "the task's pod")
	assert.Equal(t, 1, series(t, api, `task_mem_usage_byte{job="fixture",job_name="batch/nightly-etl-7f9c"}`), "a plain Kubernetes job named after its pod")
	assert.Equal(t, 1, series(t, api, `service_cpu_seconds_total{job="fixture",name="prometheus-server"}`), "a service named by its container")
	assert.Equal(t, 1, series(t, api, `zombie_process_count{job="fixture",command="nvidia-smi"} == 2`))
}

// startPrometheus runs a real Prometheus that scrapes each job's metrics URL every second and
// evaluates ruleFiles every second, and returns the prefix of its instant-query API.
func startPrometheus(tb testing.TB, jobs map[string]string, ruleFiles ...string) string {
	tb.Helper()
	var scrapeConfigs string
	for job, metrics := range jobs {
		scrapeConfigs += fmt.Sprintf("  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, hostPort(metrics))
	}
	return startPrometheusWith(tb, scrapeConfigs, ruleFiles...)
}

// startPrometheusWith runs a real Prometheus with these scrape_configs (YAML list items,
// indented by two spaces), a 1 s scrape and evaluation interval and ruleFiles, and returns the
// prefix of its instant-query API.
func startPrometheusWith(tb testing.TB, scrapeConfigs string, ruleFiles ...string) string {
	tb.Helper()
	return startPrometheusServer(tb, prometheusConfig{scrapeConfigs: scrapeConfigs, ruleFiles: ruleFiles}).api
}

// prometheusConfig is what a test's Prometheus runs beside the 1 s scrape and evaluation
// interval.
type prometheusConfig struct {
	// scrapeConfigs are YAML list items under scrape_configs:, indented by two spaces.
	scrapeConfigs string
	ruleFiles     []string
	// more is more of prometheus.yml (top-level keys: otlp:, storage:).
	more string
	// flags are more command-line flags (the remote-write or OTLP receiver).
	flags []string
	// port is the loopback port it listens on; 0: a free one.
	port int
}

// prometheusServer is a running Prometheus at base, its address.
type prometheusServer struct {
	metricStore
	base string
}

// startPrometheusServer runs the Prometheus of the tests (prometheusBinary) with c on a free
// loopback port, and waits until it is ready.
func startPrometheusServer(tb testing.TB, c prometheusConfig) prometheusServer {
	tb.Helper()
	cfg := "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n" + c.more
	if len(c.ruleFiles) > 0 {
		cfg += fmt.Sprintf("rule_files: [%s]\n", strings.Join(c.ruleFiles, ", "))
	}
	if c.scrapeConfigs != "" {
		cfg += "scrape_configs:\n" + c.scrapeConfigs
	}
	dir := tb.TempDir()
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))
	port := c.port
	if port == 0 {
		port = stack.FreePort(tb)
	}
	startProcess(tb, prometheusBinary(tb), append([]string{
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
	}, c.flags...)...)
	p := prometheusServer{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	p.api = p.base + "/api/v1/query?query="
	p.metrics = []string{p.base + "/metrics"}
	eventually(tb, "Prometheus to be ready", func() bool {
		_, err := httpGet(p.base + "/-/ready")
		return err == nil
	})
	return p
}

// prometheusBinary is the Prometheus server the tests run: PROMETHEUS_BIN, else Prometheus 3 of
// test/prometheus/build.sh. `make e2e` runs the package on that one, and the dashboards' and
// OpenPAI's queries once more with PROMETHEUS_BIN set to Debian's 2.42.
func prometheusBinary(tb testing.TB) string {
	tb.Helper()
	return stack.Built(tb, "PROMETHEUS_BIN", "test/prometheus/build.sh")
}

func hostPort(metricsURL string) string {
	u, _ := url.Parse(metricsURL)
	return u.Host
}

// series runs an instant query and returns how many series it matched.
func series(tb testing.TB, api, q string) int {
	return len(query(tb, api, q))
}

// query runs an instant query and returns each result's labels; none if Prometheus did not
// answer (callers poll).
func query(tb testing.TB, api, q string) []map[string]string {
	body, err := httpGet(api + url.QueryEscape(q))
	if err != nil {
		return nil
	}
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(tb, json.Unmarshal(body, &resp))
	labels := make([]map[string]string, len(resp.Data.Result))
	for i, r := range resp.Data.Result {
		labels[i] = r.Metric
	}
	return labels
}

// queryValues runs an instant query and returns each result's value (of a vector, or a scalar's
// one); none if Prometheus did not answer.
func queryValues(tb testing.TB, api, q string) []float64 {
	body, err := httpGet(api + url.QueryEscape(q))
	if err != nil {
		return nil
	}
	var resp struct {
		Data struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	require.NoError(tb, json.Unmarshal(body, &resp))
	var samples [][2]any
	switch resp.Data.ResultType {
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		require.NoError(tb, json.Unmarshal(resp.Data.Result, &vec))
		for _, v := range vec {
			samples = append(samples, v.Value)
		}
	case "scalar":
		var v [2]any
		require.NoError(tb, json.Unmarshal(resp.Data.Result, &v))
		samples = append(samples, v)
	}
	values := make([]float64, 0, len(samples))
	for _, s := range samples {
		str, _ := s[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		require.NoError(tb, err, q)
		values = append(values, f)
	}
	return values
}
