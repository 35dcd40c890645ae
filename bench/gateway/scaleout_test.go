// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// A simulated node as distro/agent.yaml ships it on a node of 8 GPUs and 200 job containers:
// a gpu collection every 10 s and a task collection every 30 s (the shipped intervals), with
// about the series each makes there (docs/edge.md, "How long an outage the queue holds": 73.8 kB and
// 435 kB of OTLP).
const (
	gpuInterval       = 10 * time.Second
	taskInterval      = 30 * time.Second
	gpus, gpuMetrics  = 8, 40
	tasks, taskMetric = 200, 15
)

// BenchmarkScaleOut is the scale-out layout under load: BENCH_SCALEOUT_AGENTS simulated nodes
// (default 40) send their collections at the shipped intervals for BENCH_SCALEOUT_DURATION
// (default 3m) over OTLP to two gateways (the scale-out overlay's arguments: distro/gateway.yaml
// with the remote-write pipeline), half of the nodes to each, which remote-write into three
// Thanos Receive in one hashring with replication factor 2. It reports, per node, the
// gateways' CPU-seconds an hour and resident memory, the receivers' resident memory, and the
// store's bytes a day as its receivers write them (what their directories grew by in the run:
// the WAL and head chunks of both replicas, before any block is cut, which takes 2 h), and the
// samples a node makes a day. docs/scale.md, "Scale on paper", extrapolates from these.
//
//	OTELCOL_BIN=$PWD/bin/otelcol-gpu THANOS_BIN=$(test/thanos/build.sh) go test -tags e2e -run '^$' -bench ScaleOut -benchtime 1x ./bench/gateway/
func BenchmarkScaleOut(b *testing.B) {
	agents := envInt(b, "BENCH_SCALEOUT_AGENTS", 40)
	duration := 3 * time.Minute
	if d := os.Getenv("BENCH_SCALEOUT_DURATION"); d != "" {
		var err error
		duration, err = time.ParseDuration(d)
		require.NoError(b, err)
	}
	thanos := stack.StartThanos(b, stack.ThanosOptions{Receivers: 3, ReplicationFactor: 2})
	secrets := stack.NewSecrets(b)
	var gateways []*stack.Gateway
	var clients []pmetricotlp.GRPCClient
	for i := range 2 {
		gateway := stack.StartGateway(b, secrets, append(scaleOutSets(b),
			"exporters::prometheusremotewrite/store::endpoint="+thanos.Receivers[i].WriteURL,
			fmt.Sprintf("exporters::otlp_grpc/gpu_health::endpoint=127.0.0.1:%d", stack.FreePort(b)),
			"exporters::otlp_grpc/gpu_health::tls::ca_file="+secrets.AgentCA)...)
		poll.Until(b, time.Minute, "the gateway to be healthy", func() bool { _, err := stack.Get(gateway.Health, 10*time.Second); return err == nil })
		conn, err := grpc.NewClient(gateway.OTLP, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: secrets.CA, MinVersion: tls.VersionTLS12})))
		require.NoError(b, err)
		b.Cleanup(func() { conn.Close() })
		gateways = append(gateways, gateway)
		clients = append(clients, pmetricotlp.NewGRPCClient(conn))
	}
	ctx := metadata.AppendToOutgoingContext(b.Context(), "authorization", "Bearer "+secrets.Token)

	var (
		procs          []procfs.Proc
		cpuBefore      []float64
		failed, points atomic.Int64
		requestBytes   [2]atomic.Int64
	)
	for _, g := range gateways {
		p, err := procfs.NewProc(g.Process.PID())
		require.NoError(b, err)
		procs = append(procs, p)
		cpuBefore = append(cpuBefore, cpuSeconds(b, p))
	}
	diskBefore := dirBytes(b, thanos.Dir)
	deadline := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	for a := range agents {
		client := clients[a%2]
		for kind, every := range []time.Duration{gpuInterval, taskInterval} {
			req := pmetricotlp.NewExportRequestFromMetrics(nodeCollection(a, kind == 0))
			size, err := req.MarshalProto()
			require.NoError(b, err)
			requestBytes[kind].Store(int64(len(size)))
			wg.Go(func() {
				// Spread over the interval, as nodes started at different times are.
				next := start.Add(every * time.Duration(a) / time.Duration(agents))
				sends := 0
				for next.Before(deadline) {
					time.Sleep(time.Until(next))
					sends++
					setAllTimestamps(req.Metrics(), pcommon.NewTimestampFromTime(time.Now()), sends)
					c, cancel := context.WithTimeout(ctx, 30*time.Second)
					if _, err := client.Export(c, req); err != nil {
						failed.Add(1)
					} else {
						points.Add(int64(req.Metrics().DataPointCount()))
					}
					cancel()
					next = next.Add(every)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	nodeHours := float64(agents) * elapsed.Hours()

	cpu, rss := 0.0, 0.0
	for i, p := range procs {
		cpu += cpuSeconds(b, p) - cpuBefore[i]
		status, err := p.NewStatus()
		require.NoError(b, err)
		rss += float64(status.VmRSS)
	}
	var receiverRSS float64
	for _, r := range thanos.Receivers {
		p, err := procfs.NewProc(r.Process.PID())
		require.NoError(b, err)
		status, err := p.NewStatus()
		require.NoError(b, err)
		receiverRSS += float64(status.VmRSS)
	}
	disk := float64(dirBytes(b, thanos.Dir) - diskBefore)
	b.ReportMetric(float64(agents), "nodes")
	b.ReportMetric(float64(points.Load())/elapsed.Seconds(), "dp/s")
	b.ReportMetric(float64(failed.Load()), "requests_failed")
	b.ReportMetric(float64(requestBytes[0].Load()), "gpu_request_bytes")
	b.ReportMetric(float64(requestBytes[1].Load()), "task_request_bytes")
	b.ReportMetric(cpu/nodeHours, "gateway_cpu_s/node-hour")
	b.ReportMetric(rss/float64(agents)/(1<<20), "gateway_rss_MiB/node")
	b.ReportMetric(receiverRSS/float64(agents)/(1<<20), "receiver_rss_MiB/node")
	b.ReportMetric(disk/nodeHours*24/(1<<20), "store_wal_MiB/node-day")
	b.ReportMetric(float64(points.Load())/elapsed.Seconds()/float64(agents)*86400, "samples/node-day")
}

// scaleOutSets are the --set flags of the scale-out overlay's gateway (its Deployment's
// arguments, read from deploy/overlays/scale-out/gateway), but --config.
func scaleOutSets(tb testing.TB) []string {
	tb.Helper()
	return stack.KustomizeSets(tb, filepath.Join(stack.RepoRoot(), "deploy", "overlays", "scale-out", "gateway", "kustomization.yaml"))
}

// nodeCollection is one collection of simulated node a: the gpu receiver's (gpus × gpuMetrics
// gauges) or the task receiver's (tasks × taskMetric gauges, with the task labels), on a
// resource with the node's identity and labels, as the agent sends it.
func nodeCollection(a int, gpu bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.PutStr("service.instance.id", fmt.Sprintf("10.2.%d.%d:9102", a/250, a%250))
	attrs.PutStr("node_name", fmt.Sprintf("node-%d", a))
	metrics := rm.ScopeMetrics().AppendEmpty().Metrics()
	if gpu {
		for n := range gpuMetrics {
			dps := gaugeNamed(metrics, fmt.Sprintf("bench_gpu_metric_%d", n))
			for g := range gpus {
				dp := dps.AppendEmpty()
				dp.SetDoubleValue(float64(g))
				dp.Attributes().PutStr("minor_number", strconv.Itoa(g))
				dp.Attributes().PutStr("uuid", fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", a, g))
			}
		}
		return md
	}
	for n := range taskMetric {
		dps := gaugeNamed(metrics, fmt.Sprintf("bench_task_metric_%d", n))
		for t := range tasks {
			dp := dps.AppendEmpty()
			dp.SetDoubleValue(float64(t))
			for k, v := range map[string]string{
				"job_name": fmt.Sprintf("user%d~job-%d", t%17, t/4), "username": fmt.Sprintf("user%d", t%17),
				"role_name": "worker", "task_index": strconv.Itoa(t % 4), "virtual_cluster": "default",
				"pod_name": fmt.Sprintf("job-%d-worker-%d", t/4, t%4), "namespace": "default",
				"container_name": "main", "container_id": fmt.Sprintf("%064x", a*1000+t),
			} {
				dp.Attributes().PutStr(k, v)
			}
		}
	}
	return md
}

func gaugeNamed(metrics pmetric.MetricSlice, name string) pmetric.NumberDataPointSlice {
	m := metrics.AppendEmpty()
	m.SetName(name)
	return m.SetEmptyGauge().DataPoints()
}

// setAllTimestamps stamps a collection with ts, and gives each of its gauges a new value that
// moves as a GPU's or a task's does (so that the store compresses it as it would real data).
func setAllTimestamps(md pmetric.Metrics, ts pcommon.Timestamp, send int) {
	metrics := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range metrics.Len() {
		dps := metrics.At(i).Gauge().DataPoints()
		for j := range dps.Len() {
			dps.At(j).SetTimestamp(ts)
			dps.At(j).SetDoubleValue(float64((send*7919+i*104729+j*1299709)%100000) / 1000)
		}
	}
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(tb, err, name)
	return n
}

// dirBytes is the size of the files under dir.
func dirBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var info fs.FileInfo
			if info, err = d.Info(); err == nil {
				n += info.Size()
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a WAL segment or head chunk removed meanwhile
		}
		return err
	}))
	return n
}
