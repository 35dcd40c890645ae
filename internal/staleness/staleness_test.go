// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package staleness

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"
)

// point is one data point, flattened for comparison.
type point struct {
	resource, scope, metric, attrs string
	ended                          bool
	sum                            bool
}

// collection builds md from points: each gets its resource ("container_id=a"), scope, metric
// (a sum when sum is set) and attributes.
func collection(points ...point) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, p := range points {
		rm := md.ResourceMetrics().AppendEmpty()
		putKV(rm.Resource().Attributes(), p.resource)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(p.scope)
		m := sm.Metrics().AppendEmpty()
		m.SetName(p.metric)
		m.SetUnit("1")
		var dp pmetric.NumberDataPoint
		if p.sum {
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp = s.DataPoints().AppendEmpty()
		} else {
			dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
		}
		dp.SetDoubleValue(1)
		putKV(dp.Attributes(), p.attrs)
	}
	return md
}

func putKV(m pcommon.Map, kv string) {
	if kv == "" {
		return
	}
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			m.PutStr(kv[:i], kv[i+1:])
			return
		}
	}
}

func flatten(md pmetric.Metrics) []point {
	var out []point
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				dps, _ := metricpoints.Numbers(m)
				for l := 0; l < dps.Len(); l++ {
					out = append(out, point{
						resource: kvOf(rm.Resource().Attributes()), scope: sm.Scope().Name(), metric: m.Name(),
						attrs: kvOf(dps.At(l).Attributes()), ended: dps.At(l).Flags().NoRecordedValue(),
						sum: m.Type() == pmetric.MetricTypeSum,
					})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].resource+out[i].metric+out[i].attrs < out[j].resource+out[j].metric+out[j].attrs
	})
	return out
}

func kvOf(m pcommon.Map) string {
	for k, v := range m.All() {
		return k + "=" + v.AsString()
	}
	return ""
}

func TestEndGone(t *testing.T) {
	tr := NewTracker()
	now := pcommon.Timestamp(1)
	running := point{resource: "container_id=a", scope: "task", metric: "task_cpu_seconds_total", sum: true}
	other := point{resource: "container_id=b", scope: "task", metric: "task_cpu_seconds_total", sum: true}
	pending := point{resource: "node_name=n", scope: "watchdog", metric: "pai_pod_count", attrs: "phase=pending"}
	phaseRunning := point{resource: "node_name=n", scope: "watchdog", metric: "pai_pod_count", attrs: "phase=running"}

	first := collection(running, other, pending)
	tr.EndGone(first, now)
	assert.Len(t, flatten(first), 3, "nothing ends on the first collection")

	// Container a exited; the pod went from pending to running.
	second := collection(other, phaseRunning)
	tr.EndGone(second, now)
	endedRunning, endedPending := running, pending
	endedRunning.ended, endedPending.ended = true, true
	assert.Equal(t, []point{endedRunning, other, endedPending, phaseRunning}, flatten(second))

	// An ended series is ended once; the ones still there are untouched.
	third := collection(other, phaseRunning)
	tr.EndGone(third, now)
	assert.Equal(t, []point{other, phaseRunning}, flatten(third))

	// A series that comes back is a series again, and ends again when it goes.
	fourth := collection(other, phaseRunning, pending)
	tr.EndGone(fourth, now)
	fifth := collection(phaseRunning)
	tr.EndGone(fifth, now)
	endedOther := other
	endedOther.ended = true
	assert.Equal(t, []point{endedOther, endedPending, phaseRunning}, flatten(fifth))
}

// TestEndedKeepsMetricIdentity: the exporter matches an end to its series by resource, scope,
// name and attributes, and renders it by type: all of them must be the series' own.
func TestEndedKeepsMetricIdentity(t *testing.T) {
	tr := NewTracker()
	md := collection(point{resource: "container_id=a", scope: "task", metric: "task_cpu_seconds_total", attrs: "mode=user", sum: true})
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetDescription("CPU time.")
	tr.EndGone(md, 1)
	gone := pmetric.NewMetrics()
	tr.EndGone(gone, 2)
	require.Equal(t, 1, gone.ResourceMetrics().Len())
	rm := gone.ResourceMetrics().At(0)
	assert.Equal(t, map[string]any{"container_id": "a"}, rm.Resource().Attributes().AsRaw())
	sm := rm.ScopeMetrics().At(0)
	assert.Equal(t, "task", sm.Scope().Name())
	m := sm.Metrics().At(0)
	assert.Equal(t, "task_cpu_seconds_total", m.Name())
	assert.Equal(t, "CPU time.", m.Description())
	require.Equal(t, pmetric.MetricTypeSum, m.Type())
	assert.True(t, m.Sum().IsMonotonic())
	dp := m.Sum().DataPoints().At(0)
	assert.True(t, dp.Flags().NoRecordedValue())
	assert.Equal(t, pcommon.Timestamp(2), dp.Timestamp())
	assert.Equal(t, map[string]any{"mode": "user"}, dp.Attributes().AsRaw())
}
