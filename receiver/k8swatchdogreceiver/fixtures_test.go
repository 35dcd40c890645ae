// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The fixture cluster of the unit tests: three nodes and pods that exercise every rule of the
// metrics (service vs job pods, job-name sources, init and sidecar containers, finished and
// unscheduled pods, a cordoned node, a node with capacity only, unknown conditions).

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

// amdGPUs is what ROCm's device plugin advertises (its default, single naming strategy).
func amdGPUs(n int64) corev1.ResourceList {
	return corev1.ResourceList{"amd.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

func node(name, ip string, allocatable, capacity corev1.ResourceList, unschedulable bool, conds ...corev1.NodeCondition) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
		Status: corev1.NodeStatus{
			Allocatable: allocatable,
			Capacity:    capacity,
			Conditions:  conds,
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
	if ip != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func nodeCond(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet" + string(t) + string(s), LastHeartbeatTime: metav1.Now()}
}

func healthyConds() []corev1.NodeCondition {
	return []corev1.NodeCondition{
		nodeCond(corev1.NodeReady, corev1.ConditionTrue),
		nodeCond(corev1.NodeMemoryPressure, corev1.ConditionFalse),
		nodeCond(corev1.NodeDiskPressure, corev1.ConditionFalse),
		nodeCond(corev1.NodePIDPressure, corev1.ConditionFalse),
	}
}

type podSpec struct {
	ns, name, node, hostIP string
	labels, annotations    map[string]string
	phase                  corev1.PodPhase
	containers, inits      []corev1.Container
	statuses               []corev1.ContainerStatus
	conds                  map[corev1.PodConditionType]corev1.ConditionStatus
}

func pod(s podSpec) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name, UID: types.UID("uid-" + s.name), Labels: s.labels, Annotations: s.annotations},
		Spec:       corev1.PodSpec{NodeName: s.node, Containers: s.containers, InitContainers: s.inits},
		Status:     corev1.PodStatus{Phase: s.phase, HostIP: s.hostIP, ContainerStatuses: s.statuses},
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled, "example.com/gate"} {
		if st, ok := s.conds[t]; ok {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: st})
		}
	}
	return p
}

// ctr is a container asking for n GPUs through its limit only, as users write it.
func ctr(name string, n int64) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/" + name}
	if n > 0 {
		c.Resources.Limits = gpus(n)
	}
	return c
}

// running is a ready container's running status.
func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

var (
	allTrue = map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodInitialized: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionTrue,
		corev1.ContainersReady: corev1.ConditionTrue, corev1.PodScheduled: corev1.ConditionTrue,
	}
	always = corev1.ContainerRestartPolicyAlways
)

func fixtureCluster() []runtime.Object {
	sidecar := ctr("sidecar", 1)
	sidecar.RestartPolicy = &always
	withEnv := ctr("worker", 2)
	withEnv.Env = []corev1.EnvVar{{Name: "PAI_JOB_NAME", Value: "alice~job1"}, {Name: "OTHER", Value: "dropped"}}
	return []runtime.Object{
		node("node-a", "10.0.0.1", gpus(16), gpus(16), false, healthyConds()...),
		node("node-b", "", gpus(4), gpus(4), true,
			nodeCond(corev1.NodeReady, corev1.ConditionFalse),
			nodeCond(corev1.NodeMemoryPressure, corev1.ConditionFalse),
			nodeCond(corev1.NodeDiskPressure, corev1.ConditionTrue),
			nodeCond(corev1.NodePIDPressure, corev1.ConditionFalse),
			nodeCond("KernelDeadlock", corev1.ConditionFalse)),
		// An AMD node (counted by the default gpu_resource_names) with no allocatable at all:
		// capacity counts.
		node("node-c", "10.0.0.3", nil, amdGPUs(2), false),

		// A service pod: one container crash-looping, one with no state reported yet.
		pod(podSpec{
			ns: "pai", name: "rest-server-0", node: "node-a", hostIP: "10.0.0.1", phase: corev1.PodRunning,
			labels:     map[string]string{"app": "rest-server"},
			containers: []corev1.Container{ctr("server", 0), ctr("proxy", 0), ctr("logger", 0)},
			statuses:   []corev1.ContainerStatus{running("server"), waiting("proxy", "CrashLoopBackOff"), {Name: "logger"}},
			conds: map[corev1.PodConditionType]corev1.ConditionStatus{
				corev1.PodInitialized: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionFalse, corev1.PodScheduled: corev1.ConditionTrue,
			},
		}),
		// OpenPAI v1 job: the job name only in the environment. 2+2 GPUs, and a one-shot init
		// container with 1 GPU that does not add to them.
		pod(podSpec{
			ns: "default", name: "job1-worker-0", node: "node-a", hostIP: "10.0.0.1", phase: corev1.PodRunning,
			containers: []corev1.Container{withEnv, ctr("helper", 2)}, inits: []corev1.Container{ctr("fetch", 1)},
			statuses: []corev1.ContainerStatus{running("worker"), running("helper")}, conds: allTrue,
		}),
		// A Kubernetes Job: sidecar (1) + main (2) = 3, but the one-shot init container after
		// the sidecar needs 4 + 1 = 5, which is the pod's request.
		pod(podSpec{
			ns: "default", name: "train-0", node: "node-a", hostIP: "10.0.0.1", phase: corev1.PodRunning,
			labels:     map[string]string{"batch.kubernetes.io/job-name": "train"},
			containers: []corev1.Container{ctr("main", 2)}, inits: []corev1.Container{sidecar, ctr("warmup", 4)},
			conds: allTrue,
		}),
		// Finished: listed, but its 8 GPUs are free again.
		pod(podSpec{
			ns: "default", name: "old-0", node: "node-a", hostIP: "10.0.0.1", phase: corev1.PodSucceeded,
			labels: map[string]string{"jobName": "old-job"}, containers: []corev1.Container{ctr("main", 8)},
			conds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodInitialized: corev1.ConditionTrue, corev1.PodReady: corev1.ConditionFalse, corev1.PodScheduled: corev1.ConditionTrue},
		}),
		// Not scheduled yet, with a readiness gate of its own (an unknown condition for OpenPAI).
		pod(podSpec{
			ns: "vc", name: "queued-0", phase: corev1.PodPending,
			labels: map[string]string{"volcano.sh/job-name": "queued"}, containers: []corev1.Container{ctr("main", 2)},
			conds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodScheduled: corev1.ConditionFalse, "example.com/gate": corev1.ConditionFalse},
		}),
		// On the cordoned node: 1 of its 4 GPUs used, 3 reserved.
		pod(podSpec{
			ns: "default", name: "job5-0", node: "node-b", hostIP: "", phase: corev1.PodRunning,
			labels: map[string]string{"jobName": "job5"}, containers: []corev1.Container{ctr("main", 1)}, conds: allTrue,
		}),
		// Neither service nor job: not listed, but its GPU counts.
		pod(podSpec{
			ns: "default", name: "plain-0", node: "node-c", hostIP: "10.0.0.3", phase: corev1.PodRunning,
			containers: []corev1.Container{ctr("main", 1)}, conds: allTrue,
		}),
	}
}

// e2eStatus fills in what the API server's validation requires of a container status.
func e2eStatus(s corev1.ContainerStatus) corev1.ContainerStatus {
	s.Image = "registry.example/" + s.Name
	s.ImageID = "sha256:0123"
	if s.State.Running != nil {
		s.State.Running.StartedAt = metav1.Now()
	}
	return s
}
