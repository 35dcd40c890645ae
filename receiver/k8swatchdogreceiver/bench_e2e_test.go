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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
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
	cfg.AuthType = kubeclient.AuthTypeKubeConfig
	cfg.KubeConfigPath = c.Kubeconfig("watchdog")
	c.GrantWatchdog("watchdog")

	heapBefore := heapInUse()
	w := newWatchdog(cfg, receivertest.NewNopSettings(metadata.Type))
	began := time.Now()
	if err := w.start(b.Context(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	sync := time.Since(began)
	b.Cleanup(func() { _ = w.shutdown(context.WithoutCancel(b.Context())) })
	if !w.synced.Load() {
		b.Fatal("caches did not sync within sync_timeout")
	}
	if n := len(w.pods.GetStore().List()); n != benchNodes*benchPodsPerNode {
		b.Fatalf("%d pods in the cache, want %d", n, benchNodes*benchPodsPerNode)
	}
	heap := heapInUse() - heapBefore
	rss := rssBytes(b)

	ctx := b.Context()
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
	ctx := b.Context()
	work := make(chan func() error)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Go(func() {
			for f := range work {
				if err := f(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range benchNodes {
		work <- func() error {
			full := benchNode(i)
			n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: full.ObjectMeta}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			n.Status = full.Status
			_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	for i := range benchNodes * benchPodsPerNode {
		node := fmt.Sprintf("node-%03d", i/benchPodsPerNode)
		work <- func() error {
			full := benchPod(i, node)
			p, err := admin.CoreV1().Pods("default").Create(ctx, full, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			p.Status = full.Status
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
	for line := range strings.SplitSeq(string(data), "\n") {
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
