// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// The large cluster of the benchmarks: 500 GPU nodes with 10 job pods each, with specs and
// statuses of the size real ones have (environment, volumes, probes, heartbeats), so that the
// stripping has its real work. BenchmarkLargeCluster (e2e) puts it in a real API server.
const (
	benchNodes       = 500
	benchPodsPerNode = 10
)

// BenchmarkCollectFake times one collection over the large cluster held by the fake clientset:
// the cost of computing every metric from the caches, without a real API server.
func BenchmarkCollectFake(b *testing.B) {
	objs := make([]runtime.Object, 0, benchNodes*(1+benchPodsPerNode))
	for i := range benchNodes {
		objs = append(objs, benchNode(i))
	}
	for i := range benchNodes * benchPodsPerNode {
		objs = append(objs, benchPod(i, fmt.Sprintf("node-%03d", i/benchPodsPerNode)))
	}
	h := newHarnessOn(b, testConfig(), fake.NewClientset(objs...))
	ctx := b.Context()
	for b.Loop() {
		if _, err := h.w.scrape(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%03d", i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("128"), "memory": resource.MustParse("2Ti")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("126"), "memory": resource.MustParse("2000Gi")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now()},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: metav1.Now()},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: metav1.Now()},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: metav1.Now()},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", OSImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://2.1.0"},
		},
	}
}

func benchPod(i int, node string) *corev1.Pod {
	env := []corev1.EnvVar{{Name: "PAI_JOB_NAME", Value: fmt.Sprintf("user%d~job%d", i%50, i/8)}}
	for k := range 20 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", k), Value: strings.Repeat("x", 40)})
	}
	worker := corev1.Container{
		Name: "worker", Image: "registry.example/train:latest", Env: env, Command: []string{"python", "train.py", "--epochs=100"},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("12"), "memory": resource.MustParse("200Gi")},
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("12"), "memory": resource.MustParse("200Gi")},
		},
		VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "shm", MountPath: "/dev/shm"}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}}},
	}
	sidecar := corev1.Container{Name: "sidecar", Image: "registry.example/logshipper:1.0", Env: env[:5]}
	return &corev1.Pod{
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.2.0.1", PodIP: "10.244.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{e2eStatus(running("worker")), e2eStatus(running("sidecar"))},
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("job%d-worker-%d", i/8, i%8),
			Labels:      map[string]string{"userName": fmt.Sprintf("user%d", i%50), "virtualCluster": "default", "type": "kube-launcher-task"},
			Annotations: map[string]string{"rest-server/port-scheduling-spec": strings.Repeat("{}", 50)},
		},
		Spec: corev1.PodSpec{
			NodeName: node, Containers: []corev1.Container{worker, sidecar},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/data"}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
		},
	}
}
