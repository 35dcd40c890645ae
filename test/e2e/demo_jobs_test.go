// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDemoJobs runs `make demo` (the demo node and the collector on distro/demo.yaml) under a
// real Prometheus: each demo job's task_gpu_percent names the GPUs it was given, the two
// notebooks sharing GPU 5 each get their own share, the MIG job its slice, the job given GPU 7
// through DRA holds it under its ResourceClaim, and the external process and the zombie
// container are reported; the jobs' task_* series carry their pods. Every demo pod has its
// sandbox beside its app container, as on a real node.
func TestDemoJobs(t *testing.T) {
	root := repoRoot(t)
	metrics, _ := startDemo(t, filepath.Join(root, "distro", "scenarios", "dgx-a100-demo.yaml"),
		filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task::collection_interval=1s",
		"receivers::task/demo::collection_interval=1s",
		"processors::gpu_attribution::refresh_interval=1s",
		"processors::gpu_attribution::pod_resources::timeout=500ms",
		"processors::gpu_attribution::zombie_after=2s",
	)
	api := startPrometheus(t, map[string]string{"demo": metrics})

	eventually(t, "the demo jobs' GPUs in Prometheus", func() bool {
		return series(t, api, `task_gpu_percent{job_name="alice~resnet50"}`) == 4 &&
			series(t, api, `task_gpu_percent{job_name="frank~llm-eval"}`) == 1 &&
			series(t, api, `zombie_container_count{type="pod_gone"} == 1`) == 1
	})
	for job, gpus := range map[string][]string{
		"alice~resnet50":          {"0", "1", "2", "3"},
		"bob~explore":             {"5"},
		"notebooks/carol-jupyter": {"5"},
	} {
		assert.Equal(t, len(gpus), series(t, api, `task_gpu_percent{job_name="`+job+`",simulated="true"}`), job)
		for _, gpu := range gpus {
			assert.Equal(t, 1, series(t, api, `task_gpu_percent{job_name="`+job+`",minor_number="`+gpu+`",uuid=~"GPU-.+"}`), "%s on GPU %s", job, gpu)
		}
	}
	assert.Equal(t, 1, series(t, api, `task_gpu_percent{job_name="alice~resnet50",minor_number="0"} == on(minor_number) group_left gpu_utilization`), "alone on its GPU: the device's utilization")
	assert.Equal(t, 1, series(t, api, `task_gpu_percent{job_name="bob~explore"} < on(minor_number) group_left gpu_utilization`), "a share, not the whole GPU")
	assert.Equal(t, 1, series(t, api, `task_gpu_percent{job_name="notebooks/carol-jupyter"} < on(minor_number) group_left gpu_utilization`))
	assert.Equal(t, 1, series(t, api, `task_gpu_mem_percent{job_name="dave~bert-infer",minor_number="6",mig_uuid=~"MIG-.+"}`), "the MIG job's slice")
	assert.Equal(t, 0, series(t, api, `task_gpu_percent{job_name="dave~bert-infer"}`), "no utilization in MIG mode")
	assert.Equal(t, 1, series(t, api, `task_gpu_percent{job_name="frank~llm-eval",minor_number="7",uuid=~"GPU-.+",dra_claim_name="llm-eval-gpu",dra_claim_namespace="research"} == 0`),
		"the GPU DRA allocated, idle, under its claim")
	assert.Equal(t, 1, series(t, api, `task_gpu_percent{dra_claim_name!=""}`), "device-plugin allocations carry no claim")
	assert.Equal(t, 1, series(t, api, `gpu_attribution_source_errors_total{source="dra"} == 0`), "the DRA claim's device is joined to its GPU")
	assert.Equal(t, 1, series(t, api, `gpu_used_by_external_process_count{minor_number="4",pid="42001"}`))
	assert.Equal(t, 1, series(t, api, `gpu_used_by_zombie_container_count{minor_number="4"}`))
	assert.Equal(t, 0, series(t, api, `task_gpu_percent{job_name="erin~sweep"}`), "the zombie holds no GPU")
	assert.Equal(t, 1, series(t, api, `task_cpu_seconds_total{job_name="bob~explore",namespace="notebooks",pod_name="bob-jupyter",container_name="notebook",simulated="true"}`), "task series carry their pod")
	assert.Equal(t, 7, series(t, api, `task_cpu_seconds_total{simulated="true"}`), "a task per app container of the seven pods: their sandboxes are none")
	assert.Equal(t, 1, series(t, api, `task_cpu_seconds_total{simulated="true",container_name=""}`), "only the gone pod's container is unnamed")
	assert.Equal(t, 0, series(t, api, `{k8s_pod_name!=""} or {k8s_namespace_name!=""} or {k8s_container_name!=""} or {k8s_pod_uid!=""}`),
		"the pod facts' OTLP names are not repeated as labels beside pod_name, namespace, container_name and pod_uid")
}
