// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8swatchdogreceiver

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
)

const (
	benchNodes       = 500
	benchPodsPerNode = 10
)

// BenchmarkLargeCluster creates 500 nodes and 5,000 pods in a real API server, then reports:
//   - sync-s: how long Start took to list both and sync the caches;
//   - heap-MiB: the Go heap the receiver holds once synced (after GC, before minus after);
//   - rss-MiB: the whole test process's resident memory at that point (client, test objects
//     and the Go runtime included, so an upper bound for the receiver);
//   - ns/op: one collection (the /healthz probe and every metric computed from the caches).
//
// Run: KUBE_APISERVER_BIN=$(test/kube/build-apiserver.sh) go test -tags e2e -run '^$' \
// -bench BenchmarkLargeCluster -benchtime 20x ./receiver/k8swatchdogreceiver/
func BenchmarkLargeCluster(b *testing.B) {
	c := kube.Start(b, "watchdog")
	populate(b, c.Admin)

	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = AuthTypeKubeConfig
	cfg.KubeConfigPath = c.Kubeconfig("watchdog")
	grantWatchdog(b, c.Admin, "watchdog")

	heapBefore := heapInUse()
	w := newWatchdog(cfg, receivertest.NewNopSettings(metadata.Type))
	began := time.Now()
	if err := w.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	sync := time.Since(began)
	b.Cleanup(func() { _ = w.shutdown(context.Background()) })
	if !w.synced.Load() {
		b.Fatal("caches did not sync within sync_timeout")
	}
	if n := len(w.pods.GetStore().List()); n != benchNodes*benchPodsPerNode {
		b.Fatalf("%d pods in the cache, want %d", n, benchNodes*benchPodsPerNode)
	}
	heap := heapInUse() - heapBefore
	rss := rssBytes(b)

	ctx := context.Background()
	for b.Loop() {
		md, err := w.scrape(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if md.DataPointCount() < benchNodes*4 {
			b.Fatalf("only %d data points", md.DataPointCount())
		}
	}
	b.ReportMetric(sync.Seconds(), "sync-s")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
}

// populate creates the nodes and pods, with statuses as kubelets write them and specs of the size
// real workloads have (environment, volumes, probes), so that the stripping has its real work.
func populate(b *testing.B, admin kubernetes.Interface) {
	b.Helper()
	ctx := context.Background()
	work := make(chan func() error)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := f(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range benchNodes {
		name := fmt.Sprintf("node-%03d", i)
		work <- func() error {
			n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			n.Status = corev1.NodeStatus{
				Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("128"), "memory": resource.MustParse("2Ti")},
				Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("126"), "memory": resource.MustParse("2000Gi")},
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now()},
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: metav1.Now()},
					{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: metav1.Now()},
					{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: metav1.Now()},
				},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)}, {Type: corev1.NodeHostName, Address: name}},
				NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: kube.KubeVersion, OSImage: "Ubuntu 24.04", ContainerRuntimeVersion: "containerd://2.1.0"},
			}
			_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	for i := range benchNodes * benchPodsPerNode {
		node := fmt.Sprintf("node-%03d", i/benchPodsPerNode)
		work <- func() error {
			p, err := admin.CoreV1().Pods("default").Create(ctx, benchPod(i, node), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			p.Status = corev1.PodStatus{
				Phase: corev1.PodRunning, HostIP: "10.2.0.1", PodIP: "10.244.0.1",
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue},
				},
				ContainerStatuses: []corev1.ContainerStatus{
					e2eStatus(running("worker", true)), e2eStatus(running("sidecar", true)),
				},
			}
			_, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("populating the cluster: %v", firstErr)
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
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job%d-worker-%d", i/8, i%8),
			Labels:      map[string]string{"userName": fmt.Sprintf("user%d", i%50), "virtualCluster": "default", "type": "kube-launcher-task"},
			Annotations: map[string]string{"rest-server/port-scheduling-spec": strings.Repeat("{}", 50)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{worker, sidecar},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/data"}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}},
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rssBytes reads the process's resident set size from /proc/self/status.
func rssBytes(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
