// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
)

const benchTasks = 200

// busyKubelet serves the busy node's pods.
func busyKubelet(b *testing.B, pods []*v1.PodResources) *podresourcestest.Server {
	srv, err := podresourcestest.NewServer(filepath.Join(socketDir(b), "kubelet.sock"))
	require.NoError(b, err)
	b.Cleanup(srv.Close)
	srv.SetPods(pods...)
	return srv
}

// busyNode is hostfixture.Busy's node with 200 task pods and their sandboxes, named in the kubelet's log layout;
// the first 32 run the bench scenario's GPU processes, four to a GPU, each holding a
// time-slicing replica of its GPU.
func busyNode(batch pmetric.Metrics) (hostfixture.Host, []*v1.PodResources) {
	h := hostfixture.Busy(2, benchTasks)
	ids := idsOf(batch)
	var pods []*v1.PodResources
	for i := range h.Pods {
		name := fmt.Sprintf("job%d-0", i)
		h.Pods[i].Containers[0].Pod = &hostfixture.PodLogs{Namespace: "jobs", Name: name, Container: "main"}
		var devs []string
		if i < 32 {
			devs = []string{fmt.Sprintf("%s::%d", ids[i/4].UUID, i%4)}
		}
		pods = append(pods, podresourcestest.Pod("jobs", name, podresourcestest.Container("main", gpuResource, devs...)))
	}
	return h, pods
}

// BenchmarkBatch is the processor's cost per gpu receiver batch on a node with 8 GPUs x 4
// processes and 200 tasks (the refreshes run on their own interval, outside the batch).
func BenchmarkBatch(b *testing.B) {
	batch := gpuBatch(b, filepath.Join("testdata", "scenarios", "bench.yaml"))
	host, pods := busyNode(batch)
	srv := busyKubelet(b, pods)
	e := newTestEnv(b, host, srv)
	out := e.process(batch)
	require.Len(b, points(out, "job_name")["task_gpu_percent"], 32, "every GPU process's task")

	in := make([]pmetric.Metrics, b.N)
	for i := range in {
		in[i] = pmetric.NewMetrics()
		batch.CopyTo(in[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.attr.processMetrics(b.Context(), in[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeletCalls runs batches as fast as they go through two pipelines' processors (as
// distro/agent.yaml has) against a kubelet refreshed every 100 ms, and reports the kubelet's
// List calls per refresh interval: 1, whatever the batch rate and the number of pipelines, so
// 6 calls a minute at the default 10 s. Run it for at least a second (-benchtime 1s, the default).
func BenchmarkKubeletCalls(b *testing.B) {
	batch := gpuBatch(b, filepath.Join("testdata", "scenarios", "bench.yaml"))
	host, pods := busyNode(batch)
	srv := busyKubelet(b, pods)
	root := filepath.Join(b.TempDir(), "host")
	require.NoError(b, hostfixture.Write(root, host))
	const interval = 100 * time.Millisecond
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath, cfg.RefreshInterval, cfg.PodResources.Socket, cfg.PodResources.Timeout = root, interval, srv.Socket, interval/2
	procs := startPipelines(b, cfg, 2)
	in := make([]pmetric.Metrics, len(procs))
	// The refresh at start is not one of the interval's.
	poll.Until(b, 10*time.Second, "the kubelet's first List call", func() bool { return srv.Calls("List") > 0 })

	listBefore := srv.Calls("List")
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, p := range procs {
			in[j] = pmetric.NewMetrics()
			batch.CopyTo(in[j])
			if err := p.ConsumeMetrics(b.Context(), in[j]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	intervals := float64(time.Since(start)) / float64(interval)
	calls := float64(srv.Calls("List") - listBefore)
	b.ReportMetric(float64(2*b.N)/intervals, "batches/refresh_interval")
	b.ReportMetric(calls/intervals, "List/refresh_interval")
	b.ReportMetric(calls/intervals*6, "calls/min@10s")
}

func startPipelines(tb testing.TB, cfg *Config, n int) []processor.Metrics {
	f := NewFactory()
	var procs []processor.Metrics
	for range n {
		set := processortest.NewNopSettings(metadata.Type)
		p, err := f.CreateMetrics(tb.Context(), set, cfg, &consumertest.MetricsSink{})
		require.NoError(tb, err)
		require.NoError(tb, p.Start(tb.Context(), nil))
		tb.Cleanup(func() { require.NoError(tb, p.Shutdown(context.WithoutCancel(tb.Context()))) })
		procs = append(procs, p)
	}
	return procs
}

// TestPipelinesShareOneKubeletClient: processors of two pipelines call the kubelet once per
// refresh between them, however many batches they see.
func TestPipelinesShareOneKubeletClient(t *testing.T) {
	batch := gpuBatch(t, scenario)
	srv := startKubelet(t, idsOf(batch))
	root := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfixture.Write(root, testHost()))
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath, cfg.RefreshInterval, cfg.PodResources.Socket = root, time.Hour, srv.Socket
	procs := startPipelines(t, cfg, 2)
	assert.Equal(t, 1, nodes.Len(), "one node inventory for the collector")

	poll.Until(t, 10*time.Second, "the kubelet's first List call", func() bool { return srv.Calls("List") >= 1 })
	for range 50 {
		for _, p := range procs {
			md := pmetric.NewMetrics()
			batch.CopyTo(md)
			require.NoError(t, p.ConsumeMetrics(t.Context(), md))
		}
	}
	assert.Equal(t, 1, srv.Calls("List"), "one call at start, none per batch or per pipeline")
	assert.Equal(t, 1, srv.Calls("GetAllocatableResources"))
}
