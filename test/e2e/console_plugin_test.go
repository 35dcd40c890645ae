// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The PromQL of OpenShift's NVIDIA GPU console plugin (rh-ecosystem-edge/console-plugin-nvidia-gpu
// at b709536ed07093a2d297d7e4283883dd1210cbde, src/), verbatim. ${…} is the plugin's template
// of the GPU it shows: the UUID of each GPU consolePluginGPUs lists.
var (
	// consolePluginGPUs lists the GPUs (src/hooks/use-gpus-info.ts): every UUID it returns.
	consolePluginGPUs = `DCGM_FI_PROF_GR_ENGINE_ACTIVE`
	// consolePluginCluster are the cluster overview's cards (src/utils/cluster-overview.ts) and
	// the GPU dashboard's workloads card's GPU column (WorkloadsCard.tsx).
	consolePluginCluster = []struct{ name, expr string }{
		{"getGPUUtilizationQuery", `count(count by (UUID,GPU_I_ID) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod=~".+"})) or vector(0)`},
		{"getGPUTotalUtilizationQuery", `count(count by (UUID,GPU_I_ID) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)) or vector(0)`},
		{"getPowerUsageUtilizationQuery", `sum(max by (UUID) (DCGM_FI_DEV_POWER_USAGE))`},
		{"getMemoryQuery", `count(count by (UUID,GPU_I_ID) (DCGM_FI_DEV_MEM_COPY_UTIL))`},
		{"WorkloadsCard GPU", `sum (DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod=~".+"}) by (exported_namespace, exported_pod, UUID)`},
	}
	// consolePluginGPU are the GPU dashboard's charts and their limits
	// (src/components/GPUDashboard/Cards/GPUDashboardGraphs.tsx), for one GPU. MetricsCard.tsx
	// asks for each chart's query as a subquery, query + "[60m:5m]": its steps fall on 5-minute
	// wall-clock boundaries, before a test's fresh Prometheus has data, so the charts' queries run
	// as they are, at the instant.
	consolePluginGPU = []struct{ name, expr string }{
		{"GPU utilization", `sum(DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="${selectedGPU?.uuid}"})`},
		{"Memory utilization", `sum(DCGM_FI_DEV_MEM_COPY_UTIL{UUID="${selectedGPU?.uuid}"})`},
		{"Encoder utilization", `sum(DCGM_FI_DEV_ENC_UTIL{UUID="${selectedGPU?.uuid}"})`},
		{"Decoder utilization", `sum(DCGM_FI_DEV_DEC_UTIL{UUID="${selectedGPU?.uuid}"})`},
		{"Power consumption", `avg(DCGM_FI_DEV_POWER_USAGE{UUID="${selectedGPU?.uuid}"})`},
		{"Power consumption max", `DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX{UUID="${selectedGPU?.uuid}"}`},
		{"GPU temperature", `avg(DCGM_FI_DEV_GPU_TEMP{UUID="${selectedGPU?.uuid}"})`},
		{"GPU clock speed", `avg(DCGM_FI_DEV_SM_CLOCK{UUID="${selectedGPU?.uuid}"})`},
		{"GPU clock speed max", `DCGM_FI_DEV_MAX_SM_CLOCK{UUID="${selectedGPU?.uuid}"}`},
		{"Memory clock speed", `DCGM_FI_DEV_MEM_CLOCK{UUID="${selectedGPU?.uuid}"}`},
		{"Memory clock speed max", `DCGM_FI_DEV_MAX_MEM_CLOCK{UUID="${selectedGPU?.uuid}"}`},
	}
	// consolePluginOthers need other exporters than ours, and are not run: kube-state-metrics'
	// kube_pod_status_phase (getGPUPodsQuery, src/utils/project-overview.ts), the kubelet's
	// cAdvisor container_memory_working_set_bytes and OpenShift's pod:container_cpu_usage:sum
	// recording rule on it (WorkloadsCard.tsx), the GPU operator's
	// gpu_operator_reconciliation_status (GPUStatus.tsx's link).
	consolePluginOthers = []string{
		`count((kube_pod_status_phase > 0) * on(pod) group_left(gpu,device,instance,modelName) label_replace(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod=~".+", exported_namespace="${project}"}, "pod", "$1", "exported_pod", "(.*)"))`,
		`pod:container_cpu_usage:sum`,
		`sum(container_memory_working_set_bytes{container=""}) BY (pod, namespace)`,
		`gpu_operator_reconciliation_status`,
	}
	// noUtilizationInMIG are the GPU dashboard's charts on what NVML, and so dcgm-exporter, has no
	// value for in MIG mode: empty for the demo's GPU 6.
	noUtilizationInMIG = map[string]bool{"Memory utilization": true, "Encoder utilization": true, "Decoder utilization": true}
)

// TestConsolePluginOnTheDemo runs the OpenShift GPU console plugin's queries, verbatim, in a real
// Prometheus scraping `make demo-dcgm` as Kubernetes discovery does a pod, with its own pod and
// namespace target labels (so the GPUs' pod labels arrive as exported_pod and
// exported_namespace, which the plugin expects): the GPU list, the cluster overview, the
// workloads' GPU column and every GPU's dashboard return data.
func TestConsolePluginOnTheDemo(t *testing.T) {
	mc := startDCGMDemoScraped(t, `{pod: otelcol-gpu-agent-x7k2p, namespace: gpu-monitoring}`)

	gpus := map[string]bool{}
	var migGPU string
	for _, labels := range query(t, mc.api, consolePluginGPUs) {
		require.NotEmpty(t, labels["UUID"])
		assert.Contains(t, labels["modelName"], "H100")
		gpus[labels["UUID"]] = true
		if labels["GPU_I_ID"] != "" {
			migGPU = labels["UUID"]
		}
	}
	require.Len(t, gpus, 8, "the plugin's GPU list")
	require.NotEmpty(t, migGPU)

	values := map[string]float64{}
	for _, q := range consolePluginCluster {
		t.Run(q.name, func(t *testing.T) {
			res := queryValues(t, mc.api, q.expr)
			require.NotEmpty(t, res, "no data: %s", q.expr)
			values[q.name] = res[0]
		})
	}
	// Counted by (UUID, GPU_I_ID): 8 GPUs and GPU 6's two MIG instances; 7 without MIG's
	// utilization. The held ones: alice's GPUs 0-1, grace's 2-3, frank's 7, and GPU 6 (its one
	// holder, on a slice, labels the GPU's series, the idle instance's included).
	assert.Equal(t, 10.0, values["getGPUTotalUtilizationQuery"])
	assert.Equal(t, 7.0, values["getMemoryQuery"])
	assert.Equal(t, 8.0, values["getGPUUtilizationQuery"])
	assert.Positive(t, values["getPowerUsageUtilizationQuery"])
	pods := map[string]bool{}
	for _, labels := range query(t, mc.api, consolePluginCluster[4].expr) {
		pods[labels["exported_namespace"]+"/"+labels["exported_pod"]] = true
	}
	assert.Equal(t, []string{"research/llm-eval-0", "research/resnet50-worker-0", "research/tokenize-worker-0", "serving/bert-infer-0"}, sortedKeys(pods))

	for uuid := range gpus {
		for _, q := range consolePluginGPU {
			expr := strings.ReplaceAll(q.expr, "${selectedGPU?.uuid}", uuid)
			n, err := mc.query(expr)
			require.NoError(t, err, expr)
			if uuid == migGPU && noUtilizationInMIG[q.name] {
				assert.Zero(t, n, "no utilization in MIG mode: %s", expr)
				continue
			}
			assert.Equal(t, 1, n, "%s of GPU %s: %s", q.name, uuid, expr)
		}
	}
	for _, expr := range consolePluginOthers {
		n, err := mc.query(expr)
		require.NoError(t, err, expr)
		assert.Zero(t, n, "needs another exporter than ours: %s", expr)
	}
}

// TestJobDashboardGPM runs the job dashboard's queries on GPM's activity (onGPM) on make
// demo-dcgm's H100s, for each job there that holds a whole GPU or a MIG slice alone: each
// returns data, and grace's busy but inefficient job shows its few busy SMs beside its high
// utilization.
func TestJobDashboardGPM(t *testing.T) {
	mc := startDCGMDemo(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "job.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	ran := 0
	for _, job := range []string{"alice~resnet50", "grace~tokenize", "dave~bert-infer", "frank~llm-eval"} {
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				key := d.UID + "/" + p.Title + "/" + target.RefID
				if !onGPM[key] {
					continue
				}
				ran++
				expr := expand(target.Expr, map[string]string{"job": regexp.QuoteMeta(job)})
				n, err := mc.query(expr)
				require.NoError(t, err, expr)
				assert.Positive(t, n, "no data for %s: %s", job, expr)
			}
		}
	}
	assert.Equal(t, 4*len(onGPM), ran)
	assert.Equal(t, 2, count(t, mc, `task_gpu_sm_active_percent{job_name="grace~tokenize"} < 30 and on(UUID) task_gpu_percent > 80`), "busy but inefficient, GPU by GPU")
}

// TestFabricOnTheDCGMDemo: make demo-dcgm's H100s show a healthy NVLink fabric (each GPU
// registered, every check of the health mask passing, every link up) beside dcgm-exporter's
// names, and the GPU health dashboard's fabric queries show it: the state and checks have data,
// the row of fabric faults none.
func TestFabricOnTheDCGMDemo(t *testing.T) {
	mc := startDCGMDemo(t)
	eventually(t, "the fabric of the demo's 8 GPUs", func() bool { return count(t, mc, `gpu_fabric_state`) == 8 })
	assert.Equal(t, 8, count(t, mc, `gpu_fabric_state == 3`), "registered")
	assert.Equal(t, 8, count(t, mc, `gpu_fabric_status == 0`))
	assert.Equal(t, 8*6, count(t, mc, `gpu_fabric_health == 0`), "every check passes")
	assert.Equal(t, 8*18, count(t, mc, `gpu_nvlink_state == 1`), "every link up")

	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "gpu-health.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	ran := 0
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			key := d.UID + "/" + p.Title + "/" + target.RefID
			hasData, ok := onFabric[key]
			if !ok {
				continue
			}
			ran++
			expr := expand(target.Expr, map[string]string{"node": ".*"})
			n, err := mc.query(expr)
			require.NoError(t, err, expr)
			assert.Equal(t, hasData, n > 0, "data %d for %s: %s", n, key, expr)
		}
	}
	assert.Equal(t, len(onFabric), ran)
}
