// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package gateway benchmarks distro/gateway.yaml as it ships (OTLP over TLS with the bearer
// token, memory_limiter, batch, the prometheus exporter): simulated agents send OTLP as fast as
// the gateway takes it, and the benchmark reports what the gateway process spent (CPU seconds
// from /proc, so datapoints per second per core), its resident memory per series held, and how
// long its /metrics page takes to render.
//
//	OTELCOL_BIN=$PWD/bin/otelcol-gpu go test -tags e2e -run '^$' -bench . -benchtime 1x ./bench/gateway/
//
// With BENCH_PROFILE_DIR set, the gateway also runs the pprof extension, and the benchmark
// writes a CPU profile of the load (cpu-<series>.pprof) and a heap profile after it
// (heap-<series>.pprof) there: `go tool pprof -top bin/otelcol-gpu FILE`. The shipped gateway
// build leaves pprof out (no shipped configuration uses it): for a profile, add contrib's
// extension/pprofextension at the pinned release to builder-config.yaml and build it again.
package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// seriesPerAgent is what one node sends in one request: 8 GPUs × 25 metrics and 200 tasks × 4.
const seriesPerAgent = 1000

func BenchmarkGateway(b *testing.B) {
	for _, agents := range []int{10, 100} {
		b.Run(fmt.Sprintf("series=%d", agents*seriesPerAgent), func(b *testing.B) {
			benchmarkGateway(b, agents, 20*time.Second)
		})
	}
}

func benchmarkGateway(b *testing.B, agents int, duration time.Duration) {
	secrets := stack.NewSecrets(b)
	profileDir := os.Getenv("BENCH_PROFILE_DIR")
	var sets []string
	pprof := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", stack.FreePort(b))
	if profileDir != "" {
		sets = append(sets, "extensions::pprof::endpoint="+strings.TrimSuffix(strings.TrimPrefix(pprof, "http://"), "/debug/pprof"),
			"service::extensions=[health_check, bearertokenauth/agents, pprof]")
	}
	gateway := stack.StartGateway(b, secrets, sets...)
	poll.Until(b, time.Minute, "the gateway to be healthy", func() bool { _, err := stack.Get(gateway.Health, 10*time.Second); return err == nil })
	proc, err := procfs.NewProc(gateway.Process.PID())
	require.NoError(b, err)

	conn, err := grpc.NewClient(gateway.OTLP, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: secrets.CA, MinVersion: tls.VersionTLS12})))
	require.NoError(b, err)
	defer conn.Close()
	client := pmetricotlp.NewGRPCClient(conn)
	ctx := metadata.AppendToOutgoingContext(b.Context(), "authorization", "Bearer "+secrets.Token)
	requests := make([]pmetricotlp.ExportRequest, agents)
	for i := range requests {
		requests[i] = pmetricotlp.NewExportRequestFromMetrics(agentMetrics(i))
	}
	send := func(i int) error {
		// A new timestamp each time, as each collection has.
		setTimestamps(requests[i].Metrics(), pcommon.NewTimestampFromTime(time.Now()))
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, exportErr := client.Export(c, requests[i])
		return exportErr
	}
	// Every agent once, so that the gateway holds every series before it is measured.
	for i := range agents {
		require.NoError(b, send(i))
	}
	poll.Until(b, time.Minute, "every series on the gateway's page", func() bool {
		page, getErr := stack.Get(gateway.Metrics, time.Minute)
		return getErr == nil && countSeries(page) >= agents*seriesPerAgent
	})

	before := cpuSeconds(b, proc)
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(duration)
	start := time.Now()
	for a := range agents {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if send(a) != nil {
					refused.Add(seriesPerAgent)
					continue
				}
				sent.Add(seriesPerAgent)
			}
		})
	}
	if profileDir != "" {
		wg.Go(func() {
			saveProfile(b, fmt.Sprintf("%s/profile?seconds=%d", pprof, int(duration.Seconds()/2)), filepath.Join(profileDir, fmt.Sprintf("cpu-%d.pprof", agents*seriesPerAgent)))
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds(b, proc) - before
	status, err := proc.NewStatus()
	require.NoError(b, err)

	renderStart := time.Now()
	page, err := stack.Get(gateway.Metrics, time.Minute)
	render := time.Since(renderStart)
	require.NoError(b, err)
	series := countSeries(page)
	if profileDir != "" {
		saveProfile(b, pprof+"/heap", filepath.Join(profileDir, fmt.Sprintf("heap-%d.pprof", series)))
	}

	b.ReportMetric(float64(sent.Load())/elapsed, "dp/s")
	b.ReportMetric(float64(sent.Load())/cpu, "dp/cpu-s")
	b.ReportMetric(cpu/elapsed, "cores")
	b.ReportMetric(float64(refused.Load()), "dp_refused")
	b.ReportMetric(float64(status.VmRSS)/float64(series), "rss_bytes/series")
	b.ReportMetric(float64(status.VmRSS)/(1<<20), "rss_MiB")
	b.ReportMetric(render.Seconds(), "render_s")
	b.ReportMetric(float64(series), "series")
}

// agentMetrics is one agent's collection: a resource per node, seriesPerAgent gauges.
func agentMetrics(agent int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "otelcol-gpu")
	rm.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("10.1.%d.%d:9102", agent/250, agent%250))
	rm.Resource().Attributes().PutStr("node_name", fmt.Sprintf("node-%d", agent))
	metrics := rm.ScopeMetrics().AppendEmpty().Metrics()
	const names = 25
	for n := range names {
		m := metrics.AppendEmpty()
		m.SetName(fmt.Sprintf("bench_metric_%d", n))
		dps := m.SetEmptyGauge().DataPoints()
		for s := range seriesPerAgent / names {
			dp := dps.AppendEmpty()
			dp.SetDoubleValue(float64(s))
			dp.Attributes().PutStr("minor_number", fmt.Sprint(s%8))
			dp.Attributes().PutStr("job_name", fmt.Sprintf("job-%d", s))
		}
	}
	return md
}

func saveProfile(tb testing.TB, url, path string) {
	body, err := stack.Get(url, 2*time.Minute)
	if err == nil {
		err = os.WriteFile(path, body, 0o600)
	}
	if err != nil {
		tb.Errorf("profile %s: %v", url, err)
	}
}

func setTimestamps(md pmetric.Metrics, ts pcommon.Timestamp) {
	metrics := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range metrics.Len() {
		dps := metrics.At(i).Gauge().DataPoints()
		for j := range dps.Len() {
			dps.At(j).SetTimestamp(ts)
		}
	}
}

func cpuSeconds(tb testing.TB, p procfs.Proc) float64 {
	tb.Helper()
	stat, err := p.Stat()
	require.NoError(tb, err)
	return stat.CPUTime()
}

// countSeries counts the bench_ samples on a page.
func countSeries(page []byte) int {
	n := 0
	const prefix = "bench_metric_"
	for i := 0; i+len(prefix) <= len(page); {
		if (i == 0 || page[i-1] == '\n') && string(page[i:i+len(prefix)]) == prefix {
			n++
		}
		j := i
		for j < len(page) && page[j] != '\n' {
			j++
		}
		i = j + 1
	}
	return n
}
