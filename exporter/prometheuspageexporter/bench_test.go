// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// The benchmarks run the contrib prometheus exporter and this one side by side on the same
// batches with the shipped agent's (or gateway's) settings. An agent's collection is the
// dgxh100 fixture's 8 GPUs and 200 tasks made from the attribution and task receiver goldens.

// agentBatch is one agent's collection: 8 GPUs and 200 tasks; instance names the agent
// (service.instance.id, as the agent's resource/identity sets it for the gateway) when set.
func agentBatch(tb testing.TB, instance string) pmetric.Metrics {
	tb.Helper()
	md, err := golden.ReadMetrics("../../receiver/gpureceiver/testdata/expected/dgxh100.yaml")
	require.NoError(tb, err)
	var templates []pmetric.ResourceMetrics
	for _, f := range []string{"../../processor/gpuattributionprocessor/testdata/expected/kubelet.yaml", "../../receiver/taskreceiver/testdata/expected/v2-systemd-crio.yaml"} {
		t, err := golden.ReadMetrics(f)
		require.NoError(tb, err)
		for i := 0; i < t.ResourceMetrics().Len(); i++ {
			if _, ok := t.ResourceMetrics().At(i).Resource().Attributes().Get("container_id"); ok {
				templates = append(templates, t.ResourceMetrics().At(i))
			}
		}
	}
	for i := range 200 {
		rm := md.ResourceMetrics().AppendEmpty()
		templates[i%len(templates)].CopyTo(rm)
		attrs := rm.Resource().Attributes()
		attrs.PutStr("container_id", fmt.Sprintf("%064x", i))
		attrs.PutStr("pod_uid", fmt.Sprintf("00000000-0000-4000-8000-%012x", i))
		attrs.PutStr("pod_name", fmt.Sprintf("pod-%d", i))
	}
	if instance != "" {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			md.ResourceMetrics().At(i).Resource().Attributes().PutStr("service.instance.id", instance)
		}
	}
	return md
}

// stamped is a copy of md with every point at ts, as the next collection would be.
func stamped(md pmetric.Metrics, ts time.Time) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	t := pcommon.NewTimestampFromTime(ts)
	rms := out.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					for l := 0; l < m.Gauge().DataPoints().Len(); l++ {
						m.Gauge().DataPoints().At(l).SetTimestamp(t)
					}
				case pmetric.MetricTypeSum:
					for l := 0; l < m.Sum().DataPoints().Len(); l++ {
						m.Sum().DataPoints().At(l).SetTimestamp(t)
					}
				}
			}
		}
	}
	return out
}

var implementations = []struct {
	name    string
	factory func() exporter.Factory
}{
	{"contrib", prometheusexporter.NewFactory},
	{"page", NewFactory},
}

// BenchmarkAgentBatch is the cost of taking one agent collection (for contrib: accumulating
// it; for this exporter: rendering and compressing the page).
func BenchmarkAgentBatch(b *testing.B) {
	md := agentBatch(b, "")
	settings := shippedConfigs(b)["agent.yaml"]
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			e := startExporter(b, impl.factory(), settings)
			at := time.Now()
			e.consume(b, stamped(md, at))
			b.ReportAllocs()
			var cpu cpuMeter
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				next := stamped(md, at.Add(time.Duration(i+1)*10*time.Second))
				runtime.GC() // the copy's garbage is the benchmark's, not the exporter's
				b.StartTimer()
				cpu.start()
				require.NoError(b, e.exp.ConsumeMetrics(b.Context(), next))
				cpu.stop()
			}
			cpu.report(b, float64(md.DataPointCount()), "points/cpu-s")
		})
	}
}

// discard is a ResponseWriter that keeps nothing: a scrape's own cost, without a network.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
func (d discard) reset()                    { clear(d.h) }
func newDiscard() discard                   { return discard{h: http.Header{}} }
func scrapeRequest(enc string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/metrics", http.NoBody)
	r.Header.Set("Accept-Encoding", enc)
	return r
}

// BenchmarkAgentScrape is one scrape of an agent's page: over loopback HTTP for both
// exporters (the client's reading included, alike for both), and this exporter's handler alone.
func BenchmarkAgentScrape(b *testing.B) {
	md := agentBatch(b, "")
	settings := shippedConfigs(b)["agent.yaml"]
	for _, impl := range implementations {
		for _, gz := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/http/gzip=%v", impl.name, gz), func(b *testing.B) {
				e := startExporter(b, impl.factory(), settings)
				e.consume(b, stamped(md, time.Now()))
				b.ReportAllocs()
				var cpu cpuMeter
				for b.Loop() {
					cpu.start()
					scrapeOnce(b, e.addr, gz)
					cpu.stop()
				}
				cpu.report(b, 0, "")
			})
		}
	}
	for _, enc := range []string{"identity", "gzip"} {
		b.Run("page/handler/"+enc, func(b *testing.B) {
			cfg := agentConfig()
			e, err := newPageExporter(cfg, exportertest.NewNopSettings(metadata.Type), clock.Real{})
			require.NoError(b, err)
			require.NoError(b, e.consumeMetrics(b.Context(), stamped(md, time.Now())))
			w, r := newDiscard(), scrapeRequest(enc)
			e.serveScrape(w, r) // the view, made once per change
			b.ReportAllocs()
			var cpu cpuMeter
			for b.Loop() {
				w.reset()
				cpu.start()
				e.serveScrape(w, r)
				cpu.stop()
			}
			cpu.report(b, 0, "")
		})
	}
}

func scrapeOnce(tb testing.TB, addr string, gz bool) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", http.NoBody)
	require.NoError(tb, err)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(tb, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(tb, err)
	require.NoError(tb, resp.Body.Close())
}

// BenchmarkHAPair is a collection and its scrapes, by one Prometheus and by an HA pair: the
// pair must cost less than 1.2 times the one.
func BenchmarkHAPair(b *testing.B) {
	md := agentBatch(b, "")
	settings := shippedConfigs(b)["agent.yaml"]
	for _, impl := range implementations {
		for _, scrapers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/scrapers=%d", impl.name, scrapers), func(b *testing.B) {
				e := startExporter(b, impl.factory(), settings)
				at := time.Now()
				var cpu cpuMeter
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					next := stamped(md, at.Add(time.Duration(i)*10*time.Second))
					b.StartTimer()
					cpu.start()
					require.NoError(b, e.exp.ConsumeMetrics(b.Context(), next))
					for range scrapers {
						scrapeOnce(b, e.addr, true)
					}
					cpu.stop()
				}
				cpu.report(b, 0, "")
			})
		}
	}
}

// gatewaySeries is the gateway's page in the target: 100k series from simulated agents.
const gatewaySeries = 100_000

// gatewayBatches are the agents' collections that make about gatewaySeries series.
func gatewayBatches(b *testing.B) []pmetric.Metrics {
	one := agentBatch(b, "10.0.0.0:9102")
	agents := (gatewaySeries + one.DataPointCount() - 1) / one.DataPointCount()
	out := make([]pmetric.Metrics, agents)
	for i := range out {
		out[i] = agentBatch(b, fmt.Sprintf("10.0.%d.%d:9102", i/256, i%256))
	}
	return out
}

// BenchmarkGateway fills a gateway's page from simulated agents and measures a whole round of
// their collections (points per CPU-second: the benchmark runs on one goroutine), a scrape of
// the page, and the live heap per series once the batches are gone.
func BenchmarkGateway(b *testing.B) {
	batches := gatewayBatches(b)
	points := 0
	for _, md := range batches {
		points += md.DataPointCount()
	}
	settings := shippedConfigs(b)["gateway.yaml"]
	for _, impl := range implementations {
		b.Run(impl.name+"/ingest", func(b *testing.B) {
			e := startExporter(b, impl.factory(), settings)
			at := time.Now()
			for _, md := range batches { // the series made: what follows is the steady state
				e.consume(b, stamped(md, at.Add(-10*time.Second)))
			}
			var cpu cpuMeter
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				round := make([]pmetric.Metrics, len(batches))
				for j, md := range batches {
					round[j] = stamped(md, at.Add(time.Duration(i)*10*time.Second))
				}
				runtime.GC() // the copies' garbage is the benchmark's, not the exporter's
				b.StartTimer()
				cpu.start()
				for _, md := range round {
					require.NoError(b, e.exp.ConsumeMetrics(b.Context(), md))
				}
				cpu.stop()
			}
			cpu.report(b, float64(points), "points/cpu-s")
		})
		b.Run(impl.name+"/scrape-gzip", func(b *testing.B) {
			e := startExporter(b, impl.factory(), settings)
			for _, md := range batches {
				e.consume(b, stamped(md, time.Now()))
			}
			scrapeOnce(b, e.addr, true)
			b.ReportAllocs()
			var cpu cpuMeter
			for b.Loop() {
				cpu.start()
				scrapeOnce(b, e.addr, true)
				cpu.stop()
			}
			cpu.report(b, 0, "")
		})
		b.Run(impl.name+"/heap", func(b *testing.B) {
			for b.Loop() {
				before := liveHeap()
				e := startExporter(b, impl.factory(), settings)
				for _, md := range batches {
					e.consume(b, stamped(md, time.Now()))
				}
				scrapeOnce(b, e.addr, true) // contrib keeps its metric families from the first scrape
				after := liveHeap()
				b.ReportMetric(float64(after-before)/float64(points), "live-B/series")
				runtime.KeepAlive(e)
			}
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// cpuMeter adds up the process's CPU time (user and system, every goroutine: the exporter's
// HTTP server, the collector's GC) over the timed parts of a benchmark. The machine the
// benchmarks run on may be shared: wall time per op then says little, CPU time still does.
type cpuMeter struct{ total, started time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *cpuMeter) start() { m.started = processCPU() }
func (m *cpuMeter) stop()  { m.total += processCPU() - m.started }

// report gives the CPU per op, and per unit of work when perOp is set (points per op).
func (m *cpuMeter) report(b *testing.B, perOp float64, unit string) {
	b.ReportMetric(float64(m.total.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if perOp > 0 {
		b.ReportMetric(perOp*float64(b.N)/m.total.Seconds(), unit)
	}
}
