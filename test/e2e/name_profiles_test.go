// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the otlp exporter compresses by default

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// dcgmDashboard is the PromQL of NVIDIA's dcgm-exporter Grafana dashboard
// (NVIDIA/dcgm-exporter grafana/dcgm-exporter-dashboard.json, last changed in cffaeb81), verbatim,
// by panel. Its variables: instance = label_values(DCGM_FI_DEV_GPU_TEMP, instance), gpu =
// label_values(DCGM_FI_DEV_GPU_TEMP, gpu).
var dcgmDashboard = []struct{ panel, expr string }{
	{"GPU Temperature", `DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})`},
	{"GPU Power Usage", `DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Power Total", `sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})`},
	{"GPU SM Clocks", `DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000`},
	{"GPU Utilization", `DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Framebuffer Mem Used", `DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}`},
	{"Tensor Core Utilization", `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~"$instance", gpu=~"$gpu"}`},
}

// dcgmDashboard410 is dcgmDashboard with dcgm-exporter 4.10's names, rewritten by
// docs/metrics.md's table: no 4.10 version of NVIDIA's dashboard can be read (NVIDIA/dcgm-exporter
// is readable up to d5e5f510, 4.5.3-4.8.2). Each panel keeps its unit: the SM clock is already in
// hertz, the utilization a ratio made a percent. 4.10's name of the framebuffer's used memory is
// in no readable source: that panel reads the contract's gpu_memory_used_bytes, which 4.10 keeps
// (in bytes, where the panel's unit is MB).
var dcgmDashboard410 = []struct{ panel, expr string }{
	{"GPU Temperature", `DCGM_FI_DEV_GPU_TEMP_CELSIUS{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP_CELSIUS{instance=~"$instance", gpu=~"$gpu"})`},
	{"GPU Power Usage", `DCGM_FI_DEV_BOARD_POWER_WATTS{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Power Total", `sum(DCGM_FI_DEV_BOARD_POWER_WATTS{instance=~"$instance", gpu=~"$gpu"})`},
	{"GPU SM Clocks", `DCGM_FI_DEV_SM_CLOCK_HERTZ{instance=~"$instance", gpu=~"$gpu"}`},
	{"GPU Utilization", `DCGM_FI_DEV_GPU_UTIL_RATIO{instance=~"$instance", gpu=~"$gpu"} * 100`},
	{"GPU Framebuffer Mem Used", `gpu_memory_used_bytes{instance=~"$instance", gpu=~"$gpu"}`},
	{"Tensor Core Utilization", `DCGM_FI_PROF_TENSOR_UTIL_RATIO{instance=~"$instance", gpu=~"$gpu"}`},
}

// dcgmReady are the names startDCGMDemo waits for in each dcgm_version: the temperature, the
// utilization and the graphics engine's activity.
var dcgmReady = map[string][3]string{
	"4.8":  {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"},
	"4.10": {"DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"},
}

// dcgmVersionSet is the --set that chooses the dcgm profile's generation in demo-dcgm.yaml.
func dcgmVersionSet(version string) string {
	return fmt.Sprintf("processors::name_profile/dcgm::dcgm_version=%q", version)
}

// dcgmDemo is `make demo-dcgm`'s node: the simulated DGX H100 and its pods.
func dcgmDemo(t *testing.T) (scenario, pods string) {
	root := repoRoot(t)
	return filepath.Join(root, "distro", "scenarios", "dgx-h100-demo.yaml"), filepath.Join(root, "distro", "scenarios", "pods", "dgx-h100-demo.yaml")
}

// startDCGMDemo runs `make demo-dcgm` with 1 s collections, up to the demo's steady state:
// every GPU reported, the jobs attributed, the zombie container confirmed, GPM measured.
func startDCGMDemo(t *testing.T, sets ...string) monitoredCluster {
	t.Helper()
	return startDCGMDemoScraped(t, "", sets...)
}

// startDCGMDemoScraped is startDCGMDemo with the scrape's target labels (a YAML flow map, "" for
// none), as Kubernetes discovery sets them on the agent's pod.
func startDCGMDemoScraped(t *testing.T, targetLabels string, sets ...string) monitoredCluster {
	t.Helper()
	return startDCGMDemoVersion(t, "4.8", targetLabels, sets...)
}

// startDCGMDemoVersion is startDCGMDemoScraped under the dcgm profile's version.
func startDCGMDemoVersion(t *testing.T, version, targetLabels string, sets ...string) monitoredCluster {
	t.Helper()
	ready, ok := dcgmReady[version]
	require.True(t, ok, "dcgm_version %q", version)
	sets = append(sets, dcgmVersionSet(version))
	scenario, pods := dcgmDemo(t)
	metrics, _ := startDemoWith(t, "demo-dcgm.yaml", scenario, pods,
		append([]string{
			"receivers::gpu::collection_interval=1s",
			"processors::gpu_attribution::refresh_interval=1s",
			"processors::gpu_attribution::pod_resources::timeout=500ms",
			"processors::gpu_attribution::zombie_after=2s",
		}, sets...)...)
	job := fmt.Sprintf("  - job_name: dcgm\n    static_configs: [{targets: [%q]}]\n", hostPort(metrics))
	// The GPUs' pod label, renamed by Prometheus when the target has its own.
	pod := "pod"
	if targetLabels != "" {
		job = fmt.Sprintf("  - job_name: dcgm\n    static_configs: [{targets: [%q], labels: %s}]\n", hostPort(metrics), targetLabels)
		pod = "exported_pod"
	}
	api := startPrometheusWith(t, job)
	mc := monitoredCluster{api: api, base: strings.TrimSuffix(api, "/api/v1/query?query=")}
	eventually(t, "the demo's GPUs and jobs under dcgm-exporter "+version+"'s names", func() bool {
		return series(t, api, ready[0]) == 8 &&
			series(t, api, ready[1]+`{`+pod+`!=""}`) == 5 && // alice's GPUs 0-1, grace's 2-3, frank's 7 (DRA)
			series(t, api, `zombie_container_count{type="pod_gone"} == 1`) == 1 &&
			series(t, api, ready[2]) == 10 // 8 GPUs, GPU 6's two MIG instances
	})
	return mc
}

// TestDCGMDashboardOnTheDemo runs every query of NVIDIA's dcgm-exporter dashboard, unchanged,
// in a real Prometheus scraping the demo under the dcgm profile: each returns data, "Tensor Core
// Utilization" too, from GPM on the demo's H100s.
func TestDCGMDashboardOnTheDemo(t *testing.T) {
	mc := startDCGMDemo(t)
	runDCGMDashboard(t, mc, dcgmDashboard, "DCGM_FI_DEV_GPU_TEMP")
	assertDCGMGeneration(t, mc, "4.8")

	// dcgm-exporter's labels, on each GPU; pod labels where one container holds the GPU.
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_FB_USED{UUID=~"GPU-.+", pci_bus_id=~"0000.+", modelName=~".*H100.*", Hostname="dgx-h100-demo", hostname="dgx-h100-demo", DCGM_FI_DRIVER_VERSION!="", simulated="true"}`))
	assert.Equal(t, 1, count(t, mc, `DCGM_FI_DEV_FB_USED{gpu="0", device="nvidia0", pod!="", namespace!="", container!=""}`))
	assert.Equal(t, 0, count(t, mc, `DCGM_FI_DEV_FB_USED{gpu="5", pod!=""}`), "two pods share GPU 5: their shares are task_gpu_percent")
	assert.Equal(t, 2, count(t, mc, `task_gpu_percent{gpu="5", UUID=~"GPU-.+"}`))
	assert.Equal(t, 1, count(t, mc, `DCGM_FI_DEV_FB_USED{gpu="6", pod!=""}`), "the MIG job alone on GPU 6")
	assert.Equal(t, 1, count(t, mc, `DCGM_FI_DEV_FB_USED{gpu="7", pod="llm-eval-0"}`), "the job given GPU 7 through DRA, alone on it")
	// Units: MiB within the GPU's framebuffer (gpu_memory_total_bytes, an extra, keeps its name
	// and bytes), whole MiB as dcgm-exporter reports them; the conversions are checked value by
	// value in the processor's TestUnits.
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_FB_USED <= on(UUID) gpu_memory_total_bytes / 1048576`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_FB_USED == floor(DCGM_FI_DEV_FB_USED)`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_GPU_TEMP > 20 < 100`), "°C")
	assert.Equal(t, 7, count(t, mc, `DCGM_FI_DEV_GPU_UTIL >= 0 <= 100`), "%, absent on the MIG GPU as in dcgm-exporter")
	assert.Equal(t, 0, count(t, mc, `gpu_utilization or gpu_memory_used_bytes or gpu_energy_joules_total`), "renamed, not copied")
	// The fields beyond the dashboard's: used + free + reserved is the framebuffer (whole MiB
	// each, so within 2 MiB), the HBM runs warmer than the core, bare-metal GPUs have no vGPU
	// license, and every GPU of the DGX has NVLink.
	assert.Equal(t, 8, count(t, mc, `abs(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED - on(UUID) gpu_memory_total_bytes / 1048576) <= 2`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_FB_RESERVED > 0`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_MEMORY_TEMP > DCGM_FI_DEV_GPU_TEMP`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_VGPU_LICENSE_STATUS == 0`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL >= 0`))
	busy := count(t, mc, `DCGM_FI_DEV_GPU_UTIL > 0`)
	require.Positive(t, busy)
	assert.Equal(t, busy, count(t, mc, `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL > 0 and on(UUID) DCGM_FI_DEV_GPU_UTIL > 0`), "MB/s of NVLink traffic on each busy GPU")
	assert.Equal(t, 7, count(t, mc, `DCGM_FI_DEV_MEM_COPY_UTIL >= 0 <= 100`), "absent on the MIG GPU")
	assert.Equal(t, 7, count(t, mc, `DCGM_FI_DEV_ENC_UTIL >= 0 <= 100`))
	assert.Equal(t, 7, count(t, mc, `DCGM_FI_DEV_DEC_UTIL >= 0 <= 100`))
	// The last XID, 0 on every GPU until one happens (the demo's first comes at 90 s), beside
	// the counter.
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_XID_ERRORS == 0`))

	// GPM's profiling fields as DCGM's ratios, per GPU and per MIG instance (GPU_I_ID), following
	// the demo's jobs: alice's tensor-bound training on GPUs 0-1, grace's busy but inefficient
	// job on GPUs 2-3 (utilization above 90 %, few SMs busy, almost no tensor work), frank's
	// idle GPU 7.
	for _, f := range []string{"GR_ENGINE_ACTIVE", "SM_ACTIVE", "SM_OCCUPANCY", "PIPE_TENSOR_ACTIVE", "PIPE_FP32_ACTIVE", "DRAM_ACTIVE"} {
		assert.Equal(t, 10, count(t, mc, "DCGM_FI_PROF_"+f+" >= 0 <= 1"), "%s: a ratio on each GPU and MIG instance", f)
	}
	assert.Equal(t, 2, count(t, mc, `DCGM_FI_PROF_SM_ACTIVE{gpu="6", GPU_I_ID=~"1|2"}`))
	assert.Equal(t, 1, count(t, mc, `DCGM_FI_PROF_SM_ACTIVE{gpu="6", GPU_I_ID="2"} == 0`), "the idle slice")
	assert.Equal(t, 2, count(t, mc, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=~"0|1"} > 0.4`), "tensor bound")
	assert.Equal(t, 2, count(t, mc, `DCGM_FI_PROF_SM_ACTIVE{gpu=~"2|3"} < 0.3 and on(UUID) DCGM_FI_DEV_GPU_UTIL > 90`), "busy but inefficient")
	assert.Equal(t, 2, count(t, mc, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=~"2|3"} < 0.05`))
	assert.Equal(t, 1, count(t, mc, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="7"} == 0`), "held, idle")
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_PROF_PCIE_RX_BYTES >= 0`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_PROF_NVLINK_TX_BYTES >= 0`))
	assert.Equal(t, 0, count(t, mc, `gpu_sm_active_percent or gpu_pipe_active_percent`), "renamed, not copied")
	// The limits the OpenShift console plugin draws its panels against: the H100 SXM's.
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX == 700`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_MAX_SM_CLOCK == 1980`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_MAX_MEM_CLOCK == 2619`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_SM_CLOCK <= on(UUID) DCGM_FI_DEV_MAX_SM_CLOCK`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_SM_CLOCK > 100 < 3000`), "MHz")
}

// runDCGMDashboard runs each of a dashboard's queries with Grafana's "All" of its variables
// (instance and gpu, the label values of variables' metric): each returns data.
func runDCGMDashboard(t *testing.T, mc monitoredCluster, dashboard []struct{ panel, expr string }, variables string) {
	t.Helper()
	// Grafana's "All" of each variable, as its Prometheus data source writes a multi-value one.
	vars := map[string]string{}
	for name, label := range map[string]string{"instance": "instance", "gpu": "gpu"} {
		values := mc.labelValues(t, variables, label)
		require.NotEmpty(t, values, "label_values(%s, %s)", variables, label)
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
		}
		vars[name] = "(" + strings.Join(quoted, "|") + ")"
	}
	require.Len(t, mc.labelValues(t, variables, "gpu"), 8)

	for _, q := range dashboard {
		t.Run(q.panel, func(t *testing.T) {
			expr := expand(q.expr, vars)
			n, err := mc.query(expr)
			require.NoError(t, err, expr)
			assert.Positive(t, n, "no data: %s", expr)
		})
	}
}

// dcgmGenerationNames are the metric names of each row of docs/metrics.md's table of
// dcgm-exporter's generations, by version ("" where the row has none in that version).
func dcgmGenerationNames(t *testing.T) []map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "metrics.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## dcgm-exporter's generations")
	require.True(t, ok, "docs/metrics.md has the table of dcgm-exporter's generations")
	name := regexp.MustCompile("^`(DCGM_FI_[A-Z0-9_]+)`$")
	var rows []map[string]string
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 8 || strings.Contains(line, "---") || strings.TrimSpace(cells[1]) == "4.8" {
			if len(rows) > 0 && !strings.HasPrefix(line, "|") {
				break
			}
			continue
		}
		row := map[string]string{}
		for version, col := range map[string]int{"4.8": 1, "4.10": 3} {
			if m := name.FindStringSubmatch(strings.TrimSpace(cells[col])); m != nil && strings.TrimSpace(cells[col+1]) != "label" {
				row[version] = m[1]
			}
		}
		rows = append(rows, row)
	}
	require.Greater(t, len(rows), 30, "the table's rows")
	return rows
}

// assertDCGMGeneration: the page has every DCGM name of the version's column of docs/metrics.md's
// table and none of the other version's, and the version's labels.
func assertDCGMGeneration(t *testing.T, mc monitoredCluster, version string) {
	t.Helper()
	onPage := map[string]bool{}
	for _, labels := range query(t, mc.api, `count by (__name__) ({__name__=~"DCGM_FI_.+"})`) {
		onPage[labels["__name__"]] = true
	}
	other := map[string]string{"4.8": "4.10", "4.10": "4.8"}[version]
	for _, row := range dcgmGenerationNames(t) {
		if own := row[version]; own != "" {
			assert.True(t, onPage[own], "%s is not on the page with dcgm_version %s", own, version)
		}
		if theirs := row[other]; theirs != "" && theirs != row[version] {
			assert.False(t, onPage[theirs], "%s, a %s name, is on the page with dcgm_version %s", theirs, other, version)
		}
	}
	driver := map[string]string{"4.8": "DCGM_FI_DRIVER_VERSION", "4.10": "DCGM_FI_SYSTEM_DRIVER_VERSION"}
	assert.Equal(t, 8, count(t, mc, `count by (UUID) ({__name__=~"DCGM_FI_.+", `+driver[version]+`!="", hostname="dgx-h100-demo"})`))
	assert.Equal(t, 0, count(t, mc, `{__name__=~"DCGM_FI_.+", `+driver[other]+`!=""}`), "the other version's driver label")
	hostnames := 0
	if version == "4.8" {
		hostnames = 8 // Hostname too, for dashboards of releases up to 4.8.2
	}
	assert.Equal(t, hostnames, count(t, mc, `count by (UUID) ({__name__=~"DCGM_FI_.+", Hostname="dgx-h100-demo"})`))
}

// TestDCGM410DashboardOnTheDemo runs NVIDIA's dashboard rewritten with 4.10's names on the demo
// under dcgm_version "4.10": each query returns data, in 4.10's units (Hz, J, ratios, bytes),
// with 4.10's labels, and no 4.8 name is on the page.
func TestDCGM410DashboardOnTheDemo(t *testing.T) {
	mc := startDCGMDemoVersion(t, "4.10", "")
	runDCGMDashboard(t, mc, dcgmDashboard410, "DCGM_FI_DEV_GPU_TEMP_CELSIUS")
	assertDCGMGeneration(t, mc, "4.10")

	assert.Equal(t, 1, count(t, mc, `DCGM_FI_DEV_GPU_UTIL_RATIO{gpu="0", device="nvidia0", pod!="", namespace!="", container!=""}`))
	// Units: hertz (the H100's clocks are above 100 MHz), joules, ratios, bytes.
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_SM_CLOCK_HERTZ > 1e8 <= on(UUID) DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ == 1980e6`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ == 2619e6`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_BOARD_POWER_LIMIT_MAX_WATTS == 700`))
	assert.Equal(t, 7, count(t, mc, `DCGM_FI_DEV_GPU_UTIL_RATIO >= 0 <= 1`), "a ratio, absent on the MIG GPU")
	assert.Positive(t, count(t, mc, `DCGM_FI_DEV_GPU_UTIL_RATIO > 0.5`), "busy GPUs, not percents divided twice")
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_FB_CAPACITY_BYTES > 64 * 2^30 >= on(UUID) gpu_memory_used_bytes`), "the H100's 80 GB")
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL > 0`))
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_GPU_TEMP_CELSIUS > 20 < 100`), "°C")
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_DEV_XID_ERROR == 0`))
	busy := count(t, mc, `DCGM_FI_DEV_GPU_UTIL_RATIO > 0`)
	require.Positive(t, busy)
	assert.Equal(t, busy, count(t, mc, `DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL > 1e6 and on(UUID) DCGM_FI_DEV_GPU_UTIL_RATIO > 0`), "bytes per second of NVLink traffic on each busy GPU")
	for _, f := range []string{"GR_ENGINE_UTIL_RATIO", "SM_UTIL_RATIO", "SM_OCCUPANCY_RATIO", "TENSOR_UTIL_RATIO", "FP32_UTIL_RATIO", "DRAM_UTIL_RATIO"} {
		assert.Equal(t, 10, count(t, mc, "DCGM_FI_PROF_"+f+" >= 0 <= 1"), "%s: a ratio on each GPU and MIG instance", f)
	}
	assert.Equal(t, 8, count(t, mc, `DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND >= 0`))
	// What 4.10 names no readable source gives stays under the contract's names.
	for _, kept := range []string{"gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_memory_reserved_bytes"} {
		assert.Equal(t, 8, count(t, mc, kept), kept)
	}
	assert.Equal(t, 7, count(t, mc, `gpu_memory_controller_utilization`))
	assert.Equal(t, 0, count(t, mc, `gpu_memory_total_bytes or gpu_utilization or gpu_clock_mhz`), "renamed, not copied")
}

// TestDCGMLastXID: the demo with GPU 3 falling off the bus a second in reports XID 79 as DCGM's
// XID field (4.8's DCGM_FI_DEV_XID_ERRORS, 4.10's DCGM_FI_DEV_XID_ERROR) on GPU 3 and 0 on the
// others, and counts it in gpu_xid_errors_total.
func TestDCGMLastXID(t *testing.T) {
	for version, xid := range map[string]string{"4.8": "DCGM_FI_DEV_XID_ERRORS", "4.10": "DCGM_FI_DEV_XID_ERROR"} {
		t.Run(version, func(t *testing.T) {
			root := repoRoot(t)
			metrics, _ := startDemoWith(t, "demo-dcgm.yaml", filepath.Join(root, "receiver", "gpureceiver", "testdata", "scenarios", "xid79.yaml"),
				filepath.Join("testdata", "no-pods.yaml"),
				"receivers::gpu::collection_interval=1s", dcgmVersionSet(version))
			api := startPrometheus(t, map[string]string{"dcgm": metrics})
			eventually(t, "XID 79 on GPU 3", func() bool {
				return series(t, api, xid+`{gpu="3"} == 79`) == 1
			})
			assert.Equal(t, 1, series(t, api, `gpu_xid_errors_total{gpu="3", xid="79"} == 1`))
			assert.Equal(t, 7, series(t, api, xid+`{gpu!="3"} == 0`))
		})
	}
}

// TestDCGMPage compares the demo's whole /metrics page under the dcgm profile in each
// dcgm_version, without sample values (they follow the simulation's clock; the processor's tests
// check them), with testdata/demo-dcgm.metrics and demo-dcgm-4.10.metrics (-update rewrites
// them): every name, type, help text and label.
func TestDCGMPage(t *testing.T) {
	for golden, tc := range map[string]struct{ version, util, sm string }{
		"demo-dcgm.metrics":      {"4.8", "DCGM_FI_DEV_GPU_UTIL{", "DCGM_FI_PROF_SM_ACTIVE{"},
		"demo-dcgm-4.10.metrics": {"4.10", "DCGM_FI_DEV_GPU_UTIL_RATIO{", "DCGM_FI_PROF_SM_UTIL_RATIO{"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			scenario, pods := dcgmDemo(t)
			metrics, _ := startDemoWith(t, "demo-dcgm.yaml", scenario, pods,
				"receivers::gpu::collection_interval=1s",
				"processors::gpu_attribution::refresh_interval=1s",
				"processors::gpu_attribution::pod_resources::timeout=500ms",
				"processors::gpu_attribution::zombie_after=2s",
				dcgmVersionSet(tc.version),
			)
			// The demo settles after a few collections (a pod gone, a zombie seen zombie_after
			// later): the wait bounds a hung agent on a loaded machine and says what is missing.
			var page string
			poll.UntilNoError(t, 3*time.Minute, "the demo's steady state on the page", func() error {
				_, body, err := scrape(metrics)
				if err != nil {
					return err
				}
				page = string(body)
				return demoSettled(page, map[string]int{
					`simulated="true",type="pod_gone"} 1`: 1,
					tc.util:                               7,
					"gpu_used_by_zombie_container_count{": 1,
					tc.sm:                                 10,
					"task_gpu_sm_active_percent{":         8,
				})
			})
			// Not linted: dcgm-exporter's names are what promtool objects to (modelName, Hostname,
			// counters without _total), and dashboards query them as they are.
			goldentest.Text(t, filepath.Join("testdata", golden), withoutValues(page))
		})
	}
}

// demoSettled says which of want's substrings the page does not hold as many times as wanted.
func demoSettled(page string, want map[string]int) error {
	var missing []string
	for sub, n := range want {
		if got := strings.Count(page, sub); got != n {
			missing = append(missing, fmt.Sprintf("%q %d times, want %d", sub, got, n))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return errors.New("the page holds " + strings.Join(missing, "; "))
	}
	return nil
}

// TestUnknownProfile: a profile the processor does not know stops the collector at start-up
// with the key named.
func TestUnknownProfile(t *testing.T) {
	root := repoRoot(t)
	config := filepath.Join(root, "distro", "demo-dcgm.yaml")
	cmd := exec.Command(stack.BinaryFor(t, config), "validate", "--config", config,
		"--set", "processors::name_profile/dcgm::profile=dcgm-exporter")
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "OTELCOL_GPU_DEMO_ROOT="+filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", "v2-systemd-crio"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `processors::name_profile/dcgm::profile: must be one of openpai, dcgm, semconv; got "dcgm-exporter"`)

	// A dcgm-exporter generation it does not have, likewise.
	cmd = exec.Command(stack.BinaryFor(t, config), "validate", "--config", config, "--set", dcgmVersionSet("4.9"))
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "OTELCOL_GPU_DEMO_ROOT="+filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", "v2-systemd-crio"))
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `processors::name_profile/dcgm::dcgm_version: must be one of 4.8, 4.10; got "4.9"`)
}

func count(t *testing.T, mc monitoredCluster, q string) int {
	n, err := mc.query(q)
	require.NoError(t, err, q)
	return n
}

// withoutValues keeps a page's HELP and TYPE lines and each sample's name and labels, sorted
// within each family as the exporter's order is not fixed.
func withoutValues(page string) string {
	var out, samples []string
	flush := func() {
		sort.Strings(samples)
		out = append(out, samples...)
		samples = nil
	}
	for line := range strings.SplitSeq(strings.TrimSpace(page), "\n") {
		if strings.HasPrefix(line, "#") {
			flush()
			out = append(out, line)
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			line = line[:i]
		}
		samples = append(samples, line)
	}
	flush()
	return strings.Join(out, "\n") + "\n"
}

// otlpSink is a real OTLP/gRPC metrics endpoint that keeps what it receives.
type otlpSink struct {
	pmetricotlp.UnimplementedGRPCServer
	mu       sync.Mutex
	received []pmetric.Metrics
}

func (s *otlpSink) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md := pmetric.NewMetrics()
	req.Metrics().CopyTo(md)
	s.received = append(s.received, md)
	return pmetricotlp.NewExportResponse(), nil
}

// points are the data points received so far of the metric name, with their attributes.
func (s *otlpSink) points(name string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, md := range s.received {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if m := ms.At(k); m.Name() == name && m.Type() == pmetric.MetricTypeGauge {
						for l := 0; l < m.Gauge().DataPoints().Len(); l++ {
							pt := m.Gauge().DataPoints().At(l)
							attrs := pt.Attributes().AsRaw()
							attrs["value"] = pt.DoubleValue()
							out = append(out, attrs)
						}
					}
				}
			}
		}
	}
	return out
}

// TestSemconvOverOTLP runs distro/semconv-otlp.yaml on the demo's simulated GPUs with a real
// OTLP/gRPC endpoint: the OTLP pipeline sends OpenTelemetry's hardware names, each point with its
// GPU's hw.id and hw.type, while the same collection's Prometheus page keeps the contract's.
func TestSemconvOverOTLP(t *testing.T) {
	root := repoRoot(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	sink := &otlpSink{}
	pmetricotlp.RegisterGRPCServer(srv, sink)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	t.Setenv("OTELCOL_GPU_OTLP_ENDPOINT", lis.Addr().String())

	metrics := startCollector(t, filepath.Join(root, "distro", "semconv-otlp.yaml"),
		"receivers::gpu::backend=simulated",
		"receivers::gpu::scenario="+filepath.Join(root, "distro", "scenarios", "dgx-a100-demo.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task::collection_interval=1s",
	)
	eventually(t, "hw.gpu.utilization of the 7 GPUs outside MIG mode over OTLP", func() bool {
		ids := map[any]bool{}
		for _, p := range sink.points("hw.gpu.utilization") {
			ids[p["hw.id"]] = true
		}
		return len(ids) == 7
	})
	tasks := map[any]int{}
	for _, p := range sink.points("hw.gpu.utilization") {
		tasks[p["hw.gpu.task"]]++
		assert.Regexp(t, `^GPU-`, p["hw.id"])
		assert.Equal(t, "gpu", p["hw.type"])
		assert.Regexp(t, `^nvidia[0-7]$`, p["hw.name"])
		assert.Contains(t, p["hw.model"], "A100")
		assert.NotContains(t, p, "vender")
		assert.GreaterOrEqual(t, p["value"], 0.0)
		assert.LessOrEqual(t, p["value"], 1.0, "a fraction, not a percentage")
	}
	assert.Len(t, tasks, 3, "the general, encoder and decoder tasks: %v", tasks)
	assert.Equal(t, tasks["general"], tasks["decoder"], "each GPU outside MIG mode has both")
	assert.Equal(t, tasks["general"], tasks["encoder"])
	sensors := map[any]bool{}
	for _, p := range sink.points("hw.temperature") {
		sensors[p["hw.sensor_location"]] = true
	}
	assert.Equal(t, map[any]bool{"gpu": true, "memory": true}, sensors)
	assert.Empty(t, sink.points("gpu_utilization"), "renamed on the OTLP pipeline")

	families, _, err := scrape(metrics)
	require.NoError(t, err)
	assert.Contains(t, families, "gpu_utilization", "the scrape pipeline keeps the contract's names")
	assert.NotContains(t, families, "hw_gpu_utilization")
}
