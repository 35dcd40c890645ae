// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
)

// The agent's endpoints: it runs on the host network, so on the node's address.
var (
	agentMetrics   = "http://" + realnode.NodeIP + ":9102/metrics"
	agentTelemetry = "http://" + realnode.NodeIP + ":9103/metrics"
)

// TestRealNode runs the node's workload, then for each installer: installs otelcol-gpu, checks
// it, and uninstalls it; then the edge overlay.
func TestRealNode(t *testing.T) {
	begin := time.Now()
	dra := startDRA(t)
	w := startWorkload(t)
	t.Logf("workload running in %s", time.Since(begin).Round(100*time.Millisecond))
	checkAllocations(t)
	for _, in := range installers {
		t.Run(in.name, func(t *testing.T) {
			begin := time.Now()
			// Taken off, namespace and all, even after a failed step or check: the next installer
			// finds none of it.
			t.Cleanup(func() {
				in.uninstall(t)
				gone(t)
			})
			prepare(t, w.scenario)
			in.install(t)
			rolledOut(t, "daemonset/otelcol-gpu-agent", "deployment/otelcol-gpu-gateway")
			t.Logf("installed and ready in %s", time.Since(begin).Round(100*time.Millisecond))
			t.Run("agent", func(t *testing.T) { testAgent(t, w) })
			t.Run("dra", func(t *testing.T) { testDRA(t, dra) })
			t.Run("gateway", testGateway)
			t.Run("prometheus", testPrometheus)
			t.Run("host access", testHostAccess)
			t.Run("a pod ends", func(t *testing.T) { testPodEnds(t, w) })
			t.Run("restarts", testRestarts)
			if in.name == installers[0].name {
				t.Run("kubelet as it behaves", func(t *testing.T) { testKubeletAsItBehaves(t, w) })
			}
			t.Run("gpu health", func(t *testing.T) { testGPUHealth(t, in) })
			if in.name == "helm" {
				t.Run("validation gate", testValidationGate)
				t.Run("device taint", func(t *testing.T) { testDeviceTaint(t, w) })
			}
		})
	}
	t.Run("edge queue", func(t *testing.T) { testEdgeQueue(t, w) })
}

// checkAllocations: the kubelet gave each pod the devices the scenario's processes are on,
// as the device plugin preferred them.
func checkAllocations(t *testing.T) {
	t.Helper()
	got := allocations(t)
	slice := func(i int) string { return fmt.Sprintf("%s::%d", gpus[timeSlicedGPU].UUID, i) }
	assert.ElementsMatch(t, []string{gpus[0].UUID, gpus[1].UUID}, got["research/resnet-worker-0/trainer"], "alice's job holds GPUs 0 and 1")
	assert.Equal(t, []string{gpus[4].UUID}, got["research/sweep-3/trainer"], "erin's job holds GPU 4")
	assert.ElementsMatch(t, []string{slice(0), slice(1)}, append(got["notebooks/bob-jupyter/notebook"], got["notebooks/carol-jupyter/notebook"]...),
		"bob's and carol's notebooks hold a replica each of GPU %d", timeSlicedGPU)
	require.Len(t, got["serving/bert-infer-0/server"], 1, "dave's server holds a MIG slice")
	assert.Contains(t, gpus[3].MIG, got["serving/bert-infer-0/server"][0], "dave's server holds a MIG slice of GPU 3")
}

// testAgent: the agent runs with the shipped capabilities only, and its page has every test
// pod's task series and the GPU ones attributed through the kubelet's pod-resources.
func testAgent(t *testing.T, w *workload) {
	pid := agentPID(t)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	status := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	// SYS_PTRACE (bit 19) and nothing else, in every set that counts; no privilege to gain.
	for _, field := range []string{"CapPrm", "CapEff", "CapBnd"} {
		assert.Equal(t, "0000000000080000", status[field], "the agent's %s is SYS_PTRACE only", field)
	}
	assert.Equal(t, "1", status["NoNewPrivs"], "the agent cannot gain privileges")
	assert.Equal(t, "2", status["Seccomp"], "the runtime's seccomp profile filters the agent's system calls")

	allocated := allocations(t)
	dave := allocated["serving/bert-infer-0/server"][0]
	type task struct {
		namespace, pod, container, job string
		env                            map[string]string // the task labels from PAI_* variables
	}
	tasks := []task{
		{"research", "resnet-worker-0", "trainer", "alice~resnet50", labels("username", "alice", "role_name", "worker", "task_index", "0", "virtual_cluster", "vision")},
		{"research", "sweep-3", "trainer", "erin~sweep", labels("username", "erin", "task_index", "3")},
		{"notebooks", "bob-jupyter", "notebook", "bob~explore", labels("username", "bob")},
		{"notebooks", "carol-jupyter", "notebook", "notebooks/carol-jupyter", labels("username", "unknown")},
		{"serving", "bert-infer-0", "server", "dave~bert-infer", labels("username", "dave")},
	}
	// What each task is given, through pod-resources: its GPUs, its share of a shared one, and
	// nothing from the variable erin's pod sets itself.
	type gpuSeries struct {
		metric, pod, uuid, mig string
		value                  float64
	}
	want := []gpuSeries{
		{"task_gpu_percent", "resnet-worker-0", gpus[0].UUID, "", 80},
		{"task_gpu_percent", "resnet-worker-0", gpus[1].UUID, "", 80},
		{"task_gpu_percent", "sweep-3", gpus[4].UUID, "", 0},
		{"task_gpu_percent", "bob-jupyter", gpus[2].UUID, "", 60},
		{"task_gpu_percent", "carol-jupyter", gpus[2].UUID, "", 20},
		{"task_gpu_mem_percent", "bert-infer-0", gpus[3].UUID, dave, 100 * 6000.0 / 19968},
	}
	var p page
	if err := poll.For(waitFor, func() error {
		var err error
		if p, err = scrape(agentMetrics); err != nil {
			return err
		}
		var missing []string
		for _, ts := range tasks {
			if len(p.find("task_cpu_percent", labels("pod_name", ts.pod))) == 0 {
				missing = append(missing, "task_cpu_percent of "+ts.pod)
			}
		}
		for _, g := range want {
			if len(p.find(g.metric, labels("pod_name", g.pod, "uuid", g.uuid))) == 0 {
				missing = append(missing, g.metric+" of "+g.pod)
			}
		}
		if len(p.find("service_cpu_percent", labels("pod_name", "log-manager"))) == 0 {
			missing = append(missing, "service_cpu_percent of log-manager")
		}
		if len(missing) > 0 {
			return fmt.Errorf("the page lacks %v", missing)
		}
		return nil
	}); err != nil {
		t.Fatalf("waited %s for every test pod's series on the agent's page: %v; its warnings and errors:\n%s", waitFor, err, agentLog())
	}

	for _, ts := range tasks {
		match := labels("namespace", ts.namespace, "pod_name", ts.pod, "container_name", ts.container, "job_name", ts.job, "node_name", realnode.NodeName)
		maps.Copy(match, ts.env)
		for _, metric := range []string{"task_cpu_percent", "task_mem_usage_byte", "task_block_in_byte"} {
			assert.Len(t, p.find(metric, match), 1, "%s of %s/%s with its labels %v; the page has %v", metric, ts.namespace, ts.pod, match, p.find(metric, labels("pod_name", ts.pod)))
		}
	}
	for _, g := range want {
		got := p.find(g.metric, labels("pod_name", g.pod, "uuid", g.uuid, "mig_uuid", g.mig))
		if assert.Len(t, got, 1, "%s of %s on %s", g.metric, g.pod, g.uuid) {
			assert.InDelta(t, g.value, got[0].value, 0.01, "%s of %s on %s", g.metric, g.pod, g.uuid)
		}
	}
	assert.Empty(t, p.find("task_gpu_percent", labels("pod_name", "sweep-3", "uuid", gpus[0].UUID)),
		"erin's pod names GPU 0 in NVIDIA_VISIBLE_DEVICES, but the kubelet gave it GPU 4")
	assert.Empty(t, p.find("task_gpu_percent", labels("pod_name", "bert-infer-0")), "NVML has no utilization for a MIG slice")
	assert.Len(t, p.find("gpu_used_by_external_process_count", labels("uuid", gpus[1].UUID, "pid", fmt.Sprint(w.pids["outside"]))), 1,
		"the process outside any pod on GPU 1 is external")
	assert.Len(t, p.find("gpu_used_by_external_process_count", nil), 1, "no pod's process is external")
	if errs := p.find("gpu_attribution_source_errors_total", labels("source", "pod_resources")); assert.Len(t, errs, 1) {
		assert.Zero(t, errs[0].value, "the kubelet always answered")
	}
}

// agentPod is the agent's running pod.
func agentPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods, err := node.Admin.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
	require.NoError(t, err)
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no running agent pod among %d", len(pods.Items))
	return nil
}

// agentPID is the agent's PID on the node.
func agentPID(t *testing.T) int {
	t.Helper()
	p := agentPod(t)
	pid, err := containerPID(namespace + "/" + p.Name + "/agent")
	require.NoError(t, err)
	return pid
}

// agentLog is the last warnings and errors of the agent's log, for a failure's message.
func agentLog() string {
	out, _ := node.Kubectl(nil, "logs", "-n", namespace, "daemonset/otelcol-gpu-agent")
	var lines []string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "\twarn\t") || strings.Contains(line, "\terror\t") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
