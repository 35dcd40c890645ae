// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The watchdog's gauges carry state in their labels (pai_pod_count{phase="pending"} = 1): when a
// pod starts running, its series changes, and the old one must end. OpenPAI's watchdog rebuilt
// its whole exposition on each collection, so old series vanished at once; the prometheus
// exporter instead keeps every series until metric_expiration, and for that long a pod would be
// both pending and running, a deleted node still listed, and a recovered API server still
// "connection refused". So each series that was in the last collection and is not in this one is
// sent once more with the NoRecordedValue flag: the prometheus exporter drops it (and remote
// write turns it into a staleness marker).

// seriesTracker remembers the gauge series of the last collection. It holds one entry per
// series, so it is bounded by the cluster's size, as the caches are.
type seriesTracker struct {
	last map[string]goneSeries
}

// goneSeries is what is needed to end a series: its metric's identity and its attributes.
type goneSeries struct {
	name, description, unit string
	attrs                   pcommon.Map
}

func newSeriesTracker() *seriesTracker {
	return &seriesTracker{last: map[string]goneSeries{}}
}

// endGoneSeries adds a NoRecordedValue point to md for each gauge series of the previous call
// that md no longer has, and remembers md's series for the next call. md holds one resource and
// one scope (what the metrics builder emits).
func (s *seriesTracker) endGoneSeries(md pmetric.Metrics, now pcommon.Timestamp) {
	if md.ResourceMetrics().Len() == 0 {
		return
	}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	current := map[string]goneSeries{}
	byName := map[string]pmetric.Metric{}
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		if m.Type() != pmetric.MetricTypeGauge {
			continue
		}
		byName[m.Name()] = m
		dps := m.Gauge().DataPoints()
		for j := 0; j < dps.Len(); j++ {
			attrs := dps.At(j).Attributes()
			current[seriesKey(m.Name(), attrs)] = goneSeries{name: m.Name(), description: m.Description(), unit: m.Unit(), attrs: attrs}
		}
	}
	for key, g := range s.last {
		if _, ok := current[key]; ok {
			continue
		}
		m, ok := byName[g.name]
		if !ok {
			// The metric has no series left at all (the last pod of its kind is gone).
			m = ms.AppendEmpty()
			m.SetName(g.name)
			m.SetDescription(g.description)
			m.SetUnit(g.unit)
			m.SetEmptyGauge()
			byName[g.name] = m
		}
		dp := m.Gauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		g.attrs.CopyTo(dp.Attributes())
	}
	// The attributes are copied, since md belongs to the pipeline once it is sent; a series
	// that was already there keeps its earlier copy.
	for key, g := range current {
		if prev, ok := s.last[key]; ok {
			current[key] = prev
			continue
		}
		attrs := pcommon.NewMap()
		g.attrs.CopyTo(attrs)
		g.attrs = attrs
		current[key] = g
	}
	s.last = current
}

// seriesKey identifies a series by its metric and attributes. The attributes are taken in their
// order, not sorted: the metrics builder always puts a metric's attributes in the same order.
func seriesKey(name string, attrs pcommon.Map) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for k, v := range attrs.All() {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v.AsString())
		b.WriteByte(0)
	}
	b.WriteByte('}')
	return b.String()
}
