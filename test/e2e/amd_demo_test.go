// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// amdDemo is make demo-amd's agent (distro/demo-amd.yaml, the gpu receiver's amdgpu backend
// chosen by backend auto) on the MI300X node of test/e2e/testdata/mi300x-compressed.yaml, whose
// faults all happen within seconds, with make demo-amd's pods; this machine's node and task
// metrics come from a fixture host, so that the page is the same on every machine. A real
// Prometheus scrapes it every second and evaluates the shipped rules.
type amdDemo struct {
	monitoredCluster
	metrics string // the agent's /metrics
}

// amdFaultsSeen are the compressed scenario's faults as Prometheus sees them once they have all
// happened and the attribution has confirmed the zombie.
var amdFaultsSeen = []string{
	`gpu_ras_errors{minor_number="2",block="umc",error_type="corrected"} == 12`,
	`gpu_ras_errors{minor_number="2",block="umc",error_type="uncorrected"} == 1`,
	`gpu_pcie_link_width_current{minor_number="5"} == 8`,
	`gpu_clock_event_reason{minor_number="0",reason="sw_thermal"} == 1`,
	`gpu_clock_event_reason{minor_number="1",reason="hw_slowdown"} == 1`,
	`gpu_clock_event_reason{minor_number="6",reason="power_cap"} == 1`,
	`gpu_up{minor_number="3"} == 0`,
	`gpu_devices_detected == 7`,
	`gpu_used_by_zombie_container_count{minor_number="4"}`,
	`gpu_used_by_external_process_count{minor_number="4"}`,
	`task_gpu_percent{job_name="carol~explore"}`,
	`rate(cmd_rocm_smi_latency_seconds_count[30s]) > 0`,
}

func startAMDDemo(t *testing.T) amdDemo {
	t.Helper()
	root := repoRoot(t)
	pods, err := demonode.LoadPods(filepath.Join(root, "distro", "scenarios", "pods", "mi300x-demo.yaml"))
	require.NoError(t, err)
	sc, err := gpuscenario.Load(filepath.Join("testdata", "mi300x-compressed.yaml"))
	require.NoError(t, err)
	gpus, scenario, err := demonode.ScenarioGPUs(sc)
	require.NoError(t, err)
	// Short: the pod-resources socket lives below it (unix socket paths are limited to 108 bytes).
	dir, err := os.MkdirTemp("", "demo") //nolint:usetesting // short, as said above
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	node, err := demonode.Start(filepath.Join(dir, "node"), pods, gpus)
	require.NoError(t, err)
	t.Cleanup(node.Close)
	// The node as it starts, until the agent has seen all 8 GPUs: the scenario's clock starts
	// then, so a slow start of the agent cannot miss the GPU that is lost.
	require.NoError(t, amdgpufixture.Write(node.Root, scenario.Node(0)))
	t.Setenv("OTELCOL_GPU_DEMO_ROOT", node.Root)
	metrics, _ := startCollectorWithOutput(t, filepath.Join(root, "distro", "demo-amd.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task/demo::collection_interval=1s",
		"processors::gpu_attribution::refresh_interval=1s",
		"processors::gpu_attribution::pod_resources::timeout=500ms",
		"processors::gpu_attribution::zombie_after=2s",
		"receivers::task::collection_interval=1s",
		"receivers::task::root_path="+filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", "v2-systemd-crio"),
		// The fixture host's nvidia-smi processes in state D are NVIDIA's fault, not this node's.
		"receivers::task::metrics::zombie_process_count::enabled=false",
	)
	eventually(t, "the agent's first collection of the 8 AMD GPUs", func() bool {
		_, body, scrapeErr := scrape(metrics)
		return scrapeErr == nil && strings.Count(string(body), `gpu_utilization{`) == 8
	})
	stop, err := scenario.Start(node.Root, 200*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, stop(), "rewriting the GPUs' files") })

	pages := map[string]string{"otelcol-gpu-agent": metrics}
	api := startPrometheus(t, pages, ruleFiles(t)...)
	d := amdDemo{monitoredCluster{api: api, base: strings.TrimSuffix(api, "/api/v1/query?query="), pages: pages}, metrics}
	for _, q := range amdFaultsSeen {
		eventually(t, q, func() bool { return series(t, api, q) > 0 })
	}
	return d
}

// TestAMDDemo runs make demo-amd's agent on the compressed MI300X scenario under a real
// Prometheus: its page against testdata/demo-amd.metrics and the contract, the dashboards' AMD
// panels, the alerts of each fault on its GPU and no other, and attribution of the jobs' GPUs.
func TestAMDDemo(t *testing.T) {
	d := startAMDDemo(t)
	t.Run("page", d.testPage)
	t.Run("dashboards", d.testDashboards)
	t.Run("alerts", d.testAlerts)
	t.Run("attribution", d.testAttribution)
}

// testPage compares the page, without sample values (they follow the scenario's clock),
// with testdata/demo-amd.metrics (-update rewrites it): every name, type, help text and label;
// every family is in the contract, and promtool's linter finds nothing beyond the contract's
// own names.
func (d amdDemo) testPage(t *testing.T) {
	var page []byte
	eventually(t, "the demo's steady state on the page: GPU 3 lost, its readings gone", func() bool {
		_, body, err := scrape(d.metrics)
		page = body
		return err == nil && bytes.Contains(body, []byte(`gpu_devices_detected{node_name="mi300x-demo",simulated="true"} 7`)) &&
			bytes.Count(body, []byte("gpu_utilization{")) == 7 && bytes.Contains(body, []byte("gpu_used_by_zombie_container_count{"))
	})
	goldentest.Text(t, filepath.Join("testdata", "demo-amd.metrics"), withoutValues(string(page)))

	c, err := contract.Load(filepath.Join(repoRoot(t), "docs", "metrics.md"))
	require.NoError(t, err)
	families, err := contract.PageFamilies(bytes.NewReader(page))
	require.NoError(t, err)
	for _, problem := range c.CheckPage(families) {
		t.Errorf("the AMD demo's page: %s", problem)
	}
	lint(t, page)
}

// edgeTemperature are the dashboard queries on the edge sensor, which MI300-class GPUs do not
// have: on the MI300X demo they return nothing.
var edgeTemperature = map[string]bool{
	"gpu_health/Temperature/B":       true,
	"pai_nodeview/GPU temperature/B": true,
}

// testDashboards: every AMD-only query of the dashboards (onAMD) has data on the AMD GPUs,
// except the edge temperature, which must be absent; the vender variable lists amd, with which
// every query that filters on it has data (GPU utilization, power, clocks, PCIe link, health,
// faults...), and nvidia selects nothing.
func (d amdDemo) testDashboards(t *testing.T) {
	assert.Equal(t, []string{"amd"}, d.labelValues(t, "gpu_utilization", "vender"))
	seen := map[string]bool{}
	vendered := 0
	for _, target := range dashboardTargets(t, d.monitoredCluster) {
		if onAMD[target.key] {
			seen[target.key] = true
			n, err := d.query(target.expr)
			require.NoError(t, err, target.expr)
			if edgeTemperature[target.key] {
				assert.Zero(t, n, "an edge temperature on an MI300X, which has no edge sensor: %s", target.expr)
			} else {
				assert.Positive(t, n, "no AMD data: %s", target.expr)
			}
		}
		if strings.Contains(target.raw, "$vender") {
			vendered++
			vars := maps.Clone(target.vars)
			vars["vender"] = "(nvidia)"
			n, err := d.query(expand(target.raw, vars))
			require.NoError(t, err)
			assert.Zero(t, n, "AMD GPUs with vender=nvidia selected: %s", target.raw)
			n, err = d.query(target.expr) // vender is (amd), its only value
			require.NoError(t, err)
			assert.Positive(t, n, "no AMD GPU with vender=amd selected: %s", target.expr)
		}
	}
	for key := range onAMD {
		assert.True(t, seen[key], "onAMD names %q, which no dashboard has", key)
	}
	assert.Positive(t, vendered)
	for _, q := range []string{`gpu_utilization{vender=~"(amd)"}`, `gpu_mem_utilization{vender=~"(amd)"}`} {
		assert.Equal(t, 7, series(t, d.api, q), "the 7 GPUs left, by vender=amd: %s", q)
	}
}

// testAlerts: each fault of the compressed scenario raises its alert (pending or firing, as
// its `for` allows) on the GPU it is about, and no other GPU-hardware alert is raised: one RAS
// error is one alert, the power cap (the job asked for the power) none.
func (d amdDemo) testAlerts(t *testing.T) {
	want := []string{
		"GpuRasUncorrectableErrors 2 umc", "GpuPcieLinkDegraded 5 ", "GpuThermalSlowdown 0 ",
		"GpuPowerSlowdown 1 ", "GpuLost 3 ", "NodeGpuCountChanged  ",
	}
	exact := map[string]bool{}
	for _, name := range alertNames(t, filepath.Join(repoRoot(t), "deploy", "prometheus", "rules", "gpu-hardware.yaml")) {
		exact[name] = true
	}
	var got []string
	eventually(t, "the AMD demo's alerts", func() bool {
		got = nil
		for _, a := range d.alerts(t) {
			if exact[a["alertname"]] {
				got = append(got, fmt.Sprintf("%s %s %s", a["alertname"], a["minor_number"], a["block"]))
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		return slices.Equal(got, slices.Sorted(slices.Values(want)))
	})
	assert.ElementsMatch(t, want, got)
}

// testAttribution: each job's GPUs by ROCm's device plugin's PCI addresses, GPU 5 shared by two
// OpenPAI jobs split by their processes' VRAM (48 GiB to 16 GiB: 3 to 1), the host process
// external and the gone pod's container a zombie, on GPU 4.
func (d amdDemo) testAttribution(t *testing.T) {
	value := func(q string) float64 {
		values := queryValues(t, d.api, q)
		require.Len(t, values, 1, q)
		return values[0]
	}
	byGPU := func(job string) []string {
		var gpus []string
		for _, s := range query(t, d.api, `task_gpu_percent{job_name="`+job+`"}`) {
			gpus = append(gpus, s["minor_number"])
		}
		slices.Sort(gpus)
		return gpus
	}
	assert.Equal(t, []string{"0", "1", "2"}, byGPU("alice~llama-pretrain"), "GPUs 0-3 by PCI address; GPU 3 is lost")
	assert.Equal(t, []string{"6"}, byGPU("dave~mistral-infer"))
	assert.Equal(t, []string{"7"}, byGPU("frank~llm-eval"))
	assert.Equal(t, []string{"5"}, byGPU("bob~explore"), "PAI_AMD_VISIBLE_DEVICES")
	assert.Equal(t, []string{"5"}, byGPU("carol~explore"))
	assert.ElementsMatch(t, []string{"alice~llama-pretrain", "bob~explore", "carol~explore", "dave~mistral-infer", "frank~llm-eval"},
		d.labelValues(t, "task_gpu_percent", "job_name"), "no other holder")

	for _, gpu := range []string{"0", "1", "2", "6", "7"} {
		util := value(`gpu_utilization{minor_number="` + gpu + `"}`)
		assert.Equal(t, util, value(`sum(task_gpu_percent{minor_number="`+gpu+`"})`), "a GPU one job holds is all its: GPU %s", gpu)
		mem := value(`gpu_mem_utilization{minor_number="` + gpu + `"}`)
		assert.InDelta(t, mem, value(`sum(task_gpu_mem_percent{minor_number="`+gpu+`"})`), 1e-9, "GPU %s", gpu)
	}
	bob, carol := value(`task_gpu_percent{job_name="bob~explore"}`), value(`task_gpu_percent{job_name="carol~explore"}`)
	assert.InDelta(t, 3, bob/carol, 1e-9, "split by VRAM, 48 GiB to 16 GiB")
	assert.InDelta(t, value(`gpu_utilization{minor_number="5"}`), bob+carol, 1e-9)
	bobMem, carolMem := value(`task_gpu_mem_percent{job_name="bob~explore"}`), value(`task_gpu_mem_percent{job_name="carol~explore"}`)
	assert.InDelta(t, 3, bobMem/carolMem, 1e-9)
	assert.InDelta(t, 0.0, value(`task_gpu_percent{job_name="frank~llm-eval"}`), 0, "frank's GPU is idle")

	assert.Equal(t, 1, series(t, d.api, `gpu_used_by_external_process_count{minor_number="4",pid="42001"} == 1`), "the host's rocm-bandwidth-test")
	assert.Equal(t, 1, series(t, d.api, `sum(gpu_used_by_external_process_count) == 1`), "no other")
	assert.Equal(t, 1, series(t, d.api, `gpu_used_by_zombie_container_count{minor_number="4"} == 1`), "erin's container, whose pod is gone")
	assert.Equal(t, 1, series(t, d.api, `sum(gpu_used_by_zombie_container_count) == 1`), "no other")
}
