// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector

import (
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

const interval = 30 * time.Second

// kubeletBatch reads the gpu_attribution processor's expected output on a node with a kubelet:
// a real batch of the attribution, as the gateway receives it from an agent.
func kubeletBatch(tb testing.TB) pmetric.Metrics {
	tb.Helper()
	md, err := golden.ReadMetrics("../../processor/gpuattributionprocessor/testdata/expected/kubelet.yaml")
	require.NoError(tb, err)
	return md
}

// at is a copy of md with every data point collected at ts.
func at(md pmetric.Metrics, ts time.Time) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	forEachDataPoint(out, func(dp pmetric.NumberDataPoint) {
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	})
	return out
}

// onNode is md with node_name set to node on every resource.
func onNode(md pmetric.Metrics, node string) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	for _, rm := range out.ResourceMetrics().All() {
		rm.Resource().Attributes().PutStr("node_name", node)
	}
	return out
}

func forEachDataPoint(md pmetric.Metrics, fn func(pmetric.NumberDataPoint)) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				dps := pmetric.NewNumberDataPointSlice()
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
				}
				for _, dp := range dps.All() {
					fn(dp)
				}
			}
		}
	}
}

// gpu is one collection of a GPU's own series, in the gpu receiver's shape (the GPU labels on
// the resource).
type gpu struct {
	node, uuid, minor, model string
	energy                   float64
	reasons                  []string // active clock event reasons
	xids                     map[string]float64
	ecc                      map[string]float64
	migMemory                map[string]float64
}

func gpuSeries(ts time.Time, gpus ...gpu) pmetric.Metrics {
	md := pmetric.NewMetrics()
	stamp := pcommon.NewTimestampFromTime(ts)
	for _, g := range gpus {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("node_name", g.node)
		rm.Resource().Attributes().PutStr("uuid", g.uuid)
		rm.Resource().Attributes().PutStr("minor_number", g.minor)
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		gauge := func(name string, v float64, attrs ...string) {
			m := ms.AppendEmpty()
			m.SetName(name)
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(stamp)
			dp.SetDoubleValue(v)
			for i := 0; i+1 < len(attrs); i += 2 {
				dp.Attributes().PutStr(attrs[i], attrs[i+1])
			}
		}
		sum := func(name string, v float64, attrs ...string) {
			m := ms.AppendEmpty()
			m.SetName(name)
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := s.DataPoints().AppendEmpty()
			dp.SetTimestamp(stamp)
			dp.SetDoubleValue(v)
			for i := 0; i+1 < len(attrs); i += 2 {
				dp.Attributes().PutStr(attrs[i], attrs[i+1])
			}
		}
		gauge(gpunames.GPUInfo, 1, "model", g.model, "pci_bus_id", "00000000:01:00.0", "driver_version", "570.86.15")
		sum(gpunames.GPUEnergyJoulesTotal, g.energy)
		for _, r := range throttleReasonNames {
			active := 0.0
			for _, a := range g.reasons {
				if a == r {
					active = 1
				}
			}
			gauge(gpunames.GPUClockEventReason, active, "reason", r)
		}
		for code, n := range g.xids {
			sum(gpunames.GPUXIDErrorsTotal, n, "xid", code, "resolution", "restart_app")
		}
		for typ, n := range g.ecc {
			gauge(gpunames.NvidiasmiECCErrorCount, n, "type", typ)
		}
		for mig, b := range g.migMemory {
			gauge(gpunames.GPUMIGMemoryTotalBytes, b, "mig_uuid", mig)
		}
	}
	return md
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	return cfg
}

func newTestRecorder(tb testing.TB, cfg *Config, clk *clock.Fake) (*recorder, *consumertest.LogsSink) {
	tb.Helper()
	sink := &consumertest.LogsSink{}
	set := connectortest.NewNopSettings(metadata.Type)
	set.ID = component.NewID(metadata.Type) // the same connector across restarts, as in a collector
	c, err := newConnector(cfg, set, sink, clk)
	require.NoError(tb, err)
	return c, sink
}

// records decodes every record the sink holds.
func records(t *testing.T, sink *consumertest.LogsSink) map[string]jobrecord.Record {
	t.Helper()
	out := map[string]jobrecord.Record{}
	for _, ld := range sink.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					r, err := jobrecord.FromLogRecord(lr)
					require.NoError(t, err)
					name := r.Job["job_name"]
					require.NotContains(t, out, name, "one record per job")
					out[name] = r
				}
			}
		}
	}
	return out
}

func consume(tb testing.TB, c *recorder, md pmetric.Metrics) {
	tb.Helper()
	require.NoError(tb, c.ConsumeMetrics(tb.Context(), md))
}

// moveTo moves the fake clock on to ts.
func moveTo(clk *clock.Fake, ts time.Time) { clk.Advance(ts.Sub(clk.Now())) }
