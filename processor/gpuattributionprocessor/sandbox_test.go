// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// sandboxPod is one pod of TestSandboxes' node.
type sandboxPod struct {
	n                     int
	namespace, name, ctr  string
	pid                   int
	cgroupDir, leafPrefix string // the pod's cgroup and its runtime's scope prefix
	resource              string
	devices               func(gpuIDs) []string
}

// sandboxNode is a node shaped like a real one: cgroup v2 and the systemd driver, each pod's
// sandbox beside its app container (a cri-o pod too: it shares its PID namespace), the kubelet's
// log layout naming the app containers only.
func sandboxNode(sandboxFirst bool) (hostfixture.Host, []sandboxPod) {
	slice := func(qos string, n int) string {
		uid := strings.ReplaceAll(podUID(n), "-", "_")
		if qos == "" {
			return "/kubepods.slice/kubepods-pod" + uid + ".slice/"
		}
		return "/kubepods.slice/kubepods-" + qos + ".slice/kubepods-" + qos + "-pod" + uid + ".slice/"
	}
	pods := []sandboxPod{
		{
			n: 11, namespace: "team-a", name: "resnet-0", ctr: "trainer", pid: 1101, cgroupDir: slice("burstable", 11), leafPrefix: "cri-containerd-",
			resource: gpuResource, devices: func(ids gpuIDs) []string { return []string{ids[0].UUID} },
		},
		{
			n: 12, namespace: "team-b", name: "notebook-bob", ctr: "notebook", pid: 2101, cgroupDir: slice("burstable", 12), leafPrefix: "cri-containerd-",
			resource: gpuResource, devices: func(ids gpuIDs) []string { return []string{ids[2].UUID + "::0"} },
		},
		{
			n: 13, namespace: "team-c", name: "notebook-carol", ctr: "notebook", pid: 2201, cgroupDir: slice("besteffort", 13), leafPrefix: "crio-",
			resource: gpuResource, devices: func(ids gpuIDs) []string { return []string{ids[2].UUID + "::1"} },
		},
		{
			n: 14, namespace: "serving", name: "bert-0", ctr: "server", pid: 3101, cgroupDir: slice("", 14), leafPrefix: "cri-containerd-",
			resource: migResource, devices: func(ids gpuIDs) []string { return []string{ids[3].MIG[0]} },
		},
	}
	host := hostfixture.Host{CgroupVersion: 2}
	for _, p := range pods {
		sandbox := "ff" + ctrID(p.n)[2:]
		if sandboxFirst {
			sandbox = "00" + ctrID(p.n)[2:]
		}
		host.Pods = append(host.Pods, hostfixture.Pod{
			Sandbox: &hostfixture.Sandbox{ID: sandbox, PID: 900 + p.n},
			Containers: []hostfixture.Container{{
				CgroupPath: p.cgroupDir + p.leafPrefix + ctrID(p.n) + ".scope",
				Pod:        &hostfixture.PodLogs{Namespace: p.namespace, Name: p.name, Container: p.ctr},
				Processes: []hostfixture.Process{{
					PID: p.pid, Comm: "python3", Cmdline: []string{"python3"},
					Env: paiEnv(p.name, "job"), State: "S", RSSPages: 100, NetNS: uint32(4026540000 + p.n),
				}},
			}},
		})
	}
	return host, pods
}

// TestSandboxes: on a node where every pod has its sandbox, in whichever order the container ids
// sort, the kubelet's names find the app containers: the time-sliced pair is split 60/20 by its
// processes, the single-GPU pod gets its GPU and the MIG pod its slice.
func TestSandboxes(t *testing.T) {
	batch := gpuBatch(t, "testdata/scenarios/sandboxes.yaml")
	ids := idsOf(batch)
	device := deviceValues(batch)
	require.Equal(t, 80.0, device["2"].util)
	for name, sandboxFirst := range map[string]bool{"sandbox sorts first": true, "sandbox sorts last": false} {
		t.Run(name, func(t *testing.T) {
			host, pods := sandboxNode(sandboxFirst)
			var listed []*v1.PodResources
			for _, p := range pods {
				listed = append(listed, podresourcestest.Pod(p.namespace, p.name, podresourcestest.Container(p.ctr, p.resource, p.devices(ids)...)))
			}
			kubelet := startKubelet(t, ids)
			kubelet.SetPods(listed...)
			e := newTestEnv(t, host, kubelet, func(cfg *Config) { cfg.AllocationSources = []Source{SourcePodResources} })

			inv := e.attr.node.current()
			for _, p := range pods {
				key := podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: p.namespace, Pod: p.name}, Container: p.ctr}
				if assert.Contains(t, inv.byName, key) {
					assert.Equal(t, ctrID(p.n), inv.byName[key].id, "%s/%s/%s is its app container, not its sandbox", p.namespace, p.name, p.ctr)
				}
			}
			assert.Len(t, inv.byName, len(pods), "only app containers have names")

			out := e.process(batch)
			byPod := points(out, "pod_name", "minor_number", "mig_uuid")
			util, mem := byPod["task_gpu_percent"], byPod["task_gpu_mem_percent"]
			assert.InDelta(t, 60, util["notebook-bob|2|"].value, 1e-9, "60 of the GPU's 80 percent are bob's processes")
			assert.InDelta(t, 20, util["notebook-carol|2|"].value, 1e-9, "20 are carol's")
			assert.InDelta(t, device["2"].mem*6000/8000, mem["notebook-bob|2|"].value, 1e-9)
			assert.Equal(t, device["0"].util, util["resnet-0|0|"].value, "a GPU held alone")
			assert.InDelta(t, 3000.0/19968*100, mem["bert-0|3|"+ids[3].MIG[0]].value, 1e-9, "a MIG slice")
			assert.Len(t, util, 3, "no task of a sandbox, no other holder")
			assert.Empty(t, points(out, "node_name", "pid")["gpu_used_by_external_process_count"])
		})
	}
}

// TestUnfoundHolderLeavesTheGPU: pod-resources names two holders of a time-sliced GPU, but the
// node has not seen the second one's container under its name yet (the kubelet has not written
// its log link): nobody holds the GPU until it has. Deciding it on the holder found would give
// that one the whole device; the kubelet decides a GPU it allocated, so no other source guesses
// (a holder in crash back-off is not found either).
func TestUnfoundHolderLeavesTheGPU(t *testing.T) {
	batch := gpuBatch(t, "testdata/scenarios/sandboxes.yaml")
	ids := idsOf(batch)
	host, pods := sandboxNode(false)
	host.Pods[2].Containers[0].Pod = nil // carol's: no logs yet
	var listed []*v1.PodResources
	for _, p := range pods {
		listed = append(listed, podresourcestest.Pod(p.namespace, p.name, podresourcestest.Container(p.ctr, p.resource, p.devices(ids)...)))
	}
	kubelet := startKubelet(t, ids)
	kubelet.SetPods(listed...)
	e := newTestEnv(t, host, kubelet)

	util := points(e.process(batch), "job_name", "minor_number")["task_gpu_percent"]
	assert.NotContains(t, util, "notebook-bob~job|2", "not the whole device, nor the processes' guess")
	assert.NotContains(t, util, "notebook-carol~job|2")
	assert.Equal(t, 80.0, util["resnet-0~job|0"].value, "the other GPUs are pod-resources'")
}
