// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// The kubelet as it really behaves (issue 31): a restart answers List with no pods until it has
// synced them, a holder crashes and backs off, a pod's environment names a GPU the kubelet gave
// another, the kubelet stops answering. None of these may show a GPU held by a pod the kubelet
// did not give it.

// agentPod is the collector's own pod where a test runs it as one.
var agentPod = PodName{Namespace: "otelcol-gpu", Name: "otelcol-gpu-agent-x7k2p"}

// staticPod is listed at once by a kubelet that restarted.
var staticPod = podresourcestest.Pod("kube-system", "kube-apiserver-gpu-node-07", podresourcestest.Container("kube-apiserver", ""))

// allocatable is what the device plugin offers on the test node: every whole GPU but GPU 7 (left
// out of the plugin's list, as a GPU kept for something else is) and GPU 3's MIG slices.
func allocatable(ids gpuIDs) []*v1.ContainerDevices {
	whole := &v1.ContainerDevices{ResourceName: gpuResource}
	for _, i := range []int{0, 1, 2, 4, 5, 6} {
		whole.DeviceIds = append(whole.DeviceIds, ids[i].UUID)
	}
	return []*v1.ContainerDevices{whole, {ResourceName: migResource, DeviceIds: ids[3].MIG}}
}

// kubeletWithAgent is the test node's kubelet listing the collector's own pod too, and offering
// allocatable.
func kubeletWithAgent(t *testing.T, ids gpuIDs) *podresourcestest.Server {
	srv := startKubelet(t, ids)
	srv.SetPods(append(kubeletPods(ids), podresourcestest.Pod(agentPod.Namespace, agentPod.Name, podresourcestest.Container("agent", "")))...)
	srv.SetAllocatable(allocatable(ids)...)
	return srv
}

// replacePod replaces the pod of pods named as p.
func replacePod(pods []*v1.PodResources, p *v1.PodResources) []*v1.PodResources {
	for i := range pods {
		if pods[i].GetNamespace() == p.GetNamespace() && pods[i].GetName() == p.GetName() {
			pods[i] = p
		}
	}
	return pods
}

// setEnv replaces the environment of pod n's processes.
func setEnv(h *hostfixture.Host, n int, env ...string) {
	procs := h.Pods[n-1].Containers[0].Processes
	for i := range procs {
		procs[i].Env = env
	}
}

// askKubelet runs a refresh of the kubelet client and then of the node, as their loops would.
func (e *testEnv) askKubelet() {
	e.attr.node.kubelet.Refresh()
	e.refresh()
}

// view is one batch's output: utilization by job and GPU (series that go on, not those the
// batch ends), and the node's series.
type view struct {
	util    map[string]point // "job|minor"
	ready   map[string]point
	errors  float64 // pod_resources'
	zombies map[string]point
}

func (e *testEnv) view(batch pmetric.Metrics) view {
	out := e.process(batch)
	node := points(out, "node_name", "type", "source")
	util := points(out, "job_name", "minor_number")["task_gpu_percent"]
	maps.DeleteFunc(util, func(_ string, p point) bool { return p.absent })
	return view{
		util:    util,
		ready:   node["gpu_attribution_kubelet_ready"],
		errors:  node["gpu_attribution_source_errors_total"]["gpu-node-07||pod_resources"].value,
		zombies: node["zombie_container_count"],
	}
}

// TestKubeletRestartListsNoPods: a restarted kubelet answers List with no pods but its static
// ones until it has synced its pods, and GetAllocatableResources with no GPUs until the device
// plugin registers again. The answer is not taken as complete: the last complete one stands
// (the idle holder, known to the kubelet only, keeps its GPU), the gauge says 0, each such
// answer is counted, the state logged once, and no container becomes a zombie however long it
// lasts.
func TestKubeletRestartListsNoPods(t *testing.T) {
	cases := map[string]envOption{
		"its own pod missing": func(cfg *Config) { cfg.PodResources.AgentPod = agentPod },
		// Outside a pod: the answer lost every pod of the last one while their containers run.
		"outside a pod": func(*Config) {},
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			batch := gpuBatch(t, scenario)
			ids := idsOf(batch)
			keep := func(cfg *Config) { cfg.PodResources.KeepLastAnswer = 2 * time.Hour }
			e := newTestEnv(t, testHost(), kubeletWithAgent(t, ids), opt, keep)
			e.advance(5 * time.Minute)
			e.refresh()
			before := e.view(batch)
			require.Equal(t, 0.0, before.util["grace~queued|6"].value, "the idle holder, before the restart")
			require.Equal(t, 1.0, before.zombies["gpu-node-07|pod_finished|"].value)
			assert.Equal(t, 1.0, before.ready["gpu-node-07||"].value)

			e.kubelet.SetPods(staticPod)
			e.kubelet.SetAllocatable()
			// 48 minutes, far past zombie_after (and short of the refresh loops' hour, so that
			// only the test refreshes).
			for i := range 12 {
				e.advance(4 * time.Minute)
				e.askKubelet()
				v := e.view(batch)
				assert.Contains(t, v.util, "grace~queued|6", "the last complete answer stands")
				assert.Contains(t, v.util, "alice~resnet|0")
				assert.Equal(t, 0.0, v.ready["gpu-node-07||"].value, "the kubelet is not ready")
				assert.Equal(t, 1.0, v.zombies["gpu-node-07|pod_finished|"].value, "no live container becomes a zombie")
				assert.Equal(t, 1.0, v.zombies["gpu-node-07|pod_gone|"].value)
				assert.Equal(t, before.errors+float64(i+1), v.errors, "each incomplete answer counted")
			}
			assert.Equal(t, 1, e.logs.FilterMessageSnippet("The kubelet is not ready").Len(), "logged once")

			// Synced: the pods and the device plugin are back.
			e.kubelet.SetPods(append(kubeletPods(ids), staticPod, podresourcestest.Pod(agentPod.Namespace, agentPod.Name))...)
			e.kubelet.SetAllocatable(allocatable(ids)...)
			e.askKubelet()
			v := e.view(batch)
			assert.Equal(t, 1.0, v.ready["gpu-node-07||"].value)
			assert.Equal(t, 0.0, v.util["grace~queued|6"].value)
			assert.Equal(t, 1, e.logs.FilterMessageSnippet("complete again").Len())
			assert.Equal(t, 1.0, v.zombies["gpu-node-07|pod_finished|"].value, "the finished pod's container was one before and stays one")
		})
	}
}

// TestZombieAfterCountsFromReady: a container whose pod finished while the kubelet was not ready
// becomes a zombie zombie_after after the kubelet is ready again, not before.
func TestZombieAfterCountsFromReady(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), kubeletWithAgent(t, ids), func(cfg *Config) { cfg.PodResources.AgentPod = agentPod })
	e.kubelet.SetPods(staticPod)
	e.advance(10 * time.Minute)
	e.askKubelet()
	assert.Equal(t, 0.0, e.view(batch).zombies["gpu-node-07|pod_finished|"].value)

	// Ready again, without grace's pod (it ended while the kubelet was away; its container runs).
	pods := kubeletPods(ids)
	var listed []*v1.PodResources
	for _, p := range pods {
		if p.GetName() != "waiting-0" {
			listed = append(listed, p)
		}
	}
	e.kubelet.SetPods(append(listed, podresourcestest.Pod(agentPod.Namespace, agentPod.Name))...)
	e.askKubelet()
	e.advance(5*time.Minute - time.Second)
	e.askKubelet()
	assert.Equal(t, 0.0, e.view(batch).zombies["gpu-node-07|pod_finished|"].value, "zombie_after counts from when the kubelet is ready")
	e.advance(time.Second)
	e.askKubelet()
	assert.Equal(t, 2.0, e.view(batch).zombies["gpu-node-07|pod_finished|"].value, "grace's and the finished pod's containers")
}

// TestHolderInBackOff: the kubelet's holder of GPU 6 is in crash back-off (its pod listed, the
// container not running; the pod's other container runs) while another pod's environment names
// GPU 6: nobody holds GPU 6 now.
func TestHolderInBackOff(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	host := testHost()
	setEnv(&host, envJob, append(paiEnv("frank", "sweep"), "NVIDIA_VISIBLE_DEVICES=6")...)
	srv := kubeletWithAgent(t, ids)
	srv.SetPods(replacePod(kubeletPods(ids), podresourcestest.Pod("team-e", "waiting-0",
		podresourcestest.Container("waiting", ""), podresourcestest.Container("crashing", gpuResource, ids[6].UUID)))...)
	e := newTestEnv(t, host, srv)
	v := e.view(batch)
	assert.NotContains(t, v.util, "frank~sweep|6", "the environment does not override the kubelet")
	assert.NotContains(t, v.util, "grace~queued|6")
	for key := range v.util {
		assert.NotRegexp(t, `\|6$`, key, "nobody holds GPU 6 while its holder backs off")
	}
	assert.Contains(t, v.util, "heidi~odd|7", "a GPU the kubelet does not manage: the environment decides")
}

// TestEnvironmentNamesAnotherPodsGPU: a one-shot pod that held GPU 6 ended (the kubelet lists it
// no more); a pod the kubelet gave GPU 5 names GPU 6 in its environment. It holds GPU 5 only.
func TestEnvironmentNamesAnotherPodsGPU(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	host := testHost()
	setEnv(&host, envJob, append(paiEnv("frank", "sweep"), "NVIDIA_VISIBLE_DEVICES=6")...)
	srv := kubeletWithAgent(t, ids)
	// The one-shot pod is team-e/waiting-0: it ended (not listed; its container, still in the
	// fixture's tree, is on its way out).
	var listed []*v1.PodResources
	for _, p := range replacePod(kubeletPods(ids), podresourcestest.Pod("team-d", "sweep-3", podresourcestest.Container("worker", gpuResource, ids[5].UUID))) {
		if p.GetName() != "waiting-0" {
			listed = append(listed, p)
		}
	}
	srv.SetPods(listed...)
	e := newTestEnv(t, host, srv)
	e.advanceThroughLoop()
	e.askKubelet()
	v := e.view(batch)
	assert.Contains(t, v.util, "frank~sweep|5", "the GPU the kubelet gave it")
	assert.NotContains(t, v.util, "frank~sweep|6", "not the one its environment names")
}

// TestKubeletNotAnswering: a kubelet that stops answering is not ready: its last complete answer
// stands for keep_last_answer, then the GPUs it manages show no holder (never the environment's
// or the processes' guess) while the one it does not manage is the environment's; attribution
// resumes when it answers.
func TestKubeletNotAnswering(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), kubeletWithAgent(t, ids), func(cfg *Config) {
		cfg.PodResources.Timeout = 100 * time.Millisecond
		cfg.PodResources.KeepLastAnswer = 3 * time.Minute
	})
	errorsBefore := e.view(batch).errors
	e.kubelet.Hang(true)
	e.askKubelet()
	e.advance(3*time.Minute - time.Second)
	e.askKubelet()
	v := e.view(batch)
	assert.Contains(t, v.util, "grace~queued|6", "within keep_last_answer: the last answer")
	assert.Contains(t, v.util, "frank~sweep|5", "the environment on a GPU the kubelet gave nobody")
	assert.Equal(t, 0.0, v.ready["gpu-node-07||"].value)
	assert.Greater(t, v.errors, errorsBefore)

	e.advance(time.Second)
	e.askKubelet()
	v = e.view(batch)
	for key := range v.util {
		assert.Regexp(t, `\|7$`, key, "past keep_last_answer only GPU 7, which the kubelet does not manage, has a holder")
	}
	assert.Contains(t, v.util, "heidi~odd|7")
	assert.Equal(t, 1, e.logs.FilterMessageSnippet("has not been ready for keep_last_answer").Len())

	e.kubelet.Hang(false)
	e.askKubelet()
	v = e.view(batch)
	assert.Equal(t, 1.0, v.ready["gpu-node-07||"].value)
	assert.Contains(t, v.util, "grace~queued|6", "attribution resumes")
	assert.Contains(t, v.util, "alice~resnet|0")
}

// TestAllocatableRemembered: after a restart the kubelet lists no allocatable GPU until the
// device plugin registers again; when it then stops answering for longer than keep_last_answer,
// the GPUs it offered before are still its: no holder, not the environment's.
func TestAllocatableRemembered(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), kubeletWithAgent(t, ids), func(cfg *Config) {
		cfg.PodResources.Timeout = 100 * time.Millisecond
		cfg.PodResources.AgentPod = agentPod
	})
	e.kubelet.SetAllocatable()
	e.askKubelet()
	assert.Equal(t, 1.0, e.view(batch).ready["gpu-node-07||"].value, "pods synced, the plugin not registered yet")
	e.kubelet.Hang(true)
	e.askKubelet()
	e.advanceThroughLoop()
	e.askKubelet()
	v := e.view(batch)
	assert.NotContains(t, v.util, "frank~sweep|5", "GPU 5 is the kubelet's to give, though its last answer listed no GPU")
	assert.Contains(t, v.util, "heidi~odd|7")
}

// TestKubeletNotAskedYet: the node's first refresh runs beside the kubelet client's first call.
// Before the kubelet has answered, a GPU it may manage is nobody's: not erin's, whose environment
// names GPU 5 (the real node showed the environment's guess in the agent's first batch).
func TestKubeletNotAskedYet(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), kubeletWithAgent(t, ids))
	// A client made, its first call not run yet.
	fresh, err := podresources.New(podresources.Settings{Socket: e.kubelet.Socket, RefreshInterval: time.Hour, Timeout: time.Second})
	require.NoError(t, err)
	e.attr.node.kubelet = fresh
	e.refresh()
	v := e.view(batch)
	assert.Empty(t, v.util, "no holder before the kubelet's first answer")
	assert.Equal(t, 0.0, v.ready["gpu-node-07||"].value)
	assert.Empty(t, e.logs.FilterMessageSnippet("not ready").All(), "nothing to log yet")

	fresh.Refresh()
	e.refresh()
	v = e.view(batch)
	assert.Contains(t, v.util, "grace~queued|6", "its first answer decides")
	assert.Equal(t, 1.0, v.ready["gpu-node-07||"].value)
}
