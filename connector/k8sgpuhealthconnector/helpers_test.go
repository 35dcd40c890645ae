// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// The agents' data as the gpu receiver sends it (receiver/gpureceiver/metadata.yaml; the
// simulated receiver's own output in TestJudgesTheGPUReceiversHealth): each GPU is a resource
// with node_name, uuid and minor_number; gpu_health{condition} per GPU, and the node's GPU
// count on a resource with node_name only; one gpu.xid log record per XID.

// setClock puts the writer and its judge on c; before it starts.
func (w *writer) setClock(c clock.Clock) {
	w.clock = c
	w.judge.clock = c
}

// gpu is a GPU of a test node.
type gpu struct{ node, uuid, minor string }

func gpuOn(node string, minor int) gpu {
	return gpu{node: node, uuid: "GPU-" + node + "-" + strconv.Itoa(minor), minor: strconv.Itoa(minor)}
}

func (g gpu) resource(r pcommon.Resource) {
	r.Attributes().PutStr(gpunames.KeyNodeName, g.node)
	r.Attributes().PutStr(gpunames.KeyUUID, g.uuid)
	r.Attributes().PutStr(gpunames.KeyMinorNumber, g.minor)
}

// health is one collection of g's gpu_health at data time at, by condition.
func (g gpu) health(at time.Time, levels map[string]int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	g.resource(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gpu_health")
	dps := m.SetEmptyGauge().DataPoints()
	for condition, level := range levels {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr(gpunames.KeyCondition, condition)
		dp.SetIntValue(level)
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	}
	return md
}

// healthy is a collection of g with every condition ok.
func (g gpu) healthy(at time.Time) pmetric.Metrics {
	return g.health(at, map[string]int64{"nvml": 0, "xid": 0, "memory_ecc": 0, "row_remap": 0, "thermal": 0, "power": 0, "pcie_link": 0})
}

// xids are n occurrences of code on g from data time at, a microsecond apart, of the given
// resolution class.
func (g gpu) xids(at time.Time, code int, resolution, severity string, n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	g.resource(rl.Resource())
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		lr := lrs.AppendEmpty()
		lr.SetEventName("gpu.xid")
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Microsecond)))
		lr.Attributes().PutStr(gpunames.KeyXID, strconv.Itoa(code))
		lr.Attributes().PutStr(gpunames.KeyResolution, resolution)
		lr.Attributes().PutStr(gpunames.KeyXIDSeverity, severity)
		lr.Attributes().PutStr(gpunames.KeyXIDMeaning, "meaning of "+strconv.Itoa(code))
	}
	return ld
}

// gpuCount is a node's GPU count at data time at; configured < 0 leaves configured_gpu_count
// out, as the receiver does when it is not set.
func gpuCountOf(node string, at time.Time, detected, configured int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(gpunames.KeyNodeName, node)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	add := func(name string, v int64) {
		m := ms.AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetIntValue(v)
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	}
	add("gpu_devices_detected", detected)
	if configured >= 0 {
		add("configured_gpu_count", configured)
	}
	return md
}

// nodeCheckOf is the node's newest run of otelcol-gpu-check (its exit code, and when it ended)
// as the gpu receiver reports it in a collection at data time at.
func nodeCheckOf(node string, at time.Time, status int64, ended time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(gpunames.KeyNodeName, node)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	m := ms.AppendEmpty()
	m.SetName(gpunames.GPUNodeCheckStatus)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(status)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	m = ms.AppendEmpty()
	m.SetName(gpunames.GPUNodeCheckTimestampSeconds)
	dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(float64(ended.UnixNano()) / 1e9)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	return md
}

// recoveryAction is one collection of g's gpu_recovery_action at data time at.
func (g gpu) recoveryAction(at time.Time, action recoveryaction.Action) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	g.resource(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(gpunames.GPURecoveryAction)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(int64(action))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	return md
}

// points lists a metric's data points in md as "label=value,..." -> value.
func points(md pmetric.Metrics, name string) map[string]int64 {
	out := map[string]int64{}
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() != name {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				}
				for _, dp := range dps.All() {
					var kv []string
					for k, v := range dp.Attributes().All() {
						kv = append(kv, k+"="+v.AsString())
					}
					slices.Sort(kv)
					out[strings.Join(kv, ",")] = dp.IntValue()
				}
			}
		}
	}
	return out
}
