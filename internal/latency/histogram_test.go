// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package latency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestHistogram(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	h := New("cmd_nvml_latency_seconds", "Latency of NVML calls.", start)
	h.Observe(500 * time.Microsecond) // first bucket
	h.Observe(time.Second)            // le=1: bounds are inclusive upper limits
	h.Observe(90 * time.Second)       // le=120
	h.Observe(10 * time.Minute)       // +Inf

	ms := pmetric.NewMetricSlice()
	now := pcommon.NewTimestampFromTime(start.Add(time.Minute))
	h.AppendTo(ms, now)
	require.Equal(t, 1, ms.Len())
	m := ms.At(0)
	assert.Equal(t, "cmd_nvml_latency_seconds", m.Name())
	assert.Equal(t, "s", m.Unit())
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality())
	dp := m.Histogram().DataPoints().At(0)
	assert.Equal(t, pcommon.NewTimestampFromTime(start), dp.StartTimestamp())
	assert.Equal(t, now, dp.Timestamp())
	assert.Equal(t, Bounds, dp.ExplicitBounds().AsRaw())
	want := make([]uint64, len(Bounds)+1)
	want[0], want[8], want[15], want[16] = 1, 1, 1, 1
	assert.Equal(t, want, dp.BucketCounts().AsRaw())
	assert.Equal(t, uint64(4), dp.Count())
	assert.InDelta(t, 0.0005+1+90+600, dp.Sum(), 1e-9)
	assert.GreaterOrEqual(t, Bounds[len(Bounds)-2], 60.0, "buckets must reach 60 s")
}

func TestAppendToScopeWithoutBuilderMetrics(t *testing.T) {
	h := New("x_latency_seconds", "x", time.Unix(0, 0))
	res := pcommon.NewResource()
	res.Attributes().PutStr("node_name", "n1")
	md := pmetric.NewMetrics()
	AppendToScope(md, res, "scope", "1.2.3", pcommon.Timestamp(1), h)
	require.Equal(t, 1, md.ResourceMetrics().Len(), "the histogram needs a resource of its own when the builder emitted none")
	rm := md.ResourceMetrics().At(0)
	name, _ := rm.Resource().Attributes().Get("node_name")
	assert.Equal(t, "n1", name.Str())
	sm := rm.ScopeMetrics().At(0)
	assert.Equal(t, "scope", sm.Scope().Name())
	assert.Equal(t, "1.2.3", sm.Scope().Version())
	assert.Equal(t, "x_latency_seconds", sm.Metrics().At(0).Name())

	// With the builder's scope present the histogram joins it instead of adding a resource.
	AppendToScope(md, res, "scope", "1.2.3", pcommon.Timestamp(2), h)
	assert.Equal(t, 1, md.ResourceMetrics().Len())
	assert.Equal(t, 2, sm.Metrics().Len())
}
