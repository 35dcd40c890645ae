// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package staleness ends the series a receiver stopped producing: a container that exited, a
// pod that changed phase (pai_pod_count{phase="pending"} becomes {phase="running"}), a process
// that left state D. The prometheus exporter keeps every series it has seen until
// metric_expiration, so without an end a stopped task would still be on /metrics minutes later
// and a pod would be both pending and running. Each series that was in the previous collection
// and is not in this one is sent once more with the NoRecordedValue flag: the prometheus exporter
// drops it at once, and remote write turns it into a staleness marker.
package staleness // import "github.com/otelcol-gpu/otelcol-gpu/internal/staleness"

import (
	"strings"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"
)

// Tracker remembers the gauge and sum series of the last collection: one entry per series, so
// it is bounded by what the receiver reports. It is not safe for concurrent use; a receiver's
// collections run one after the other.
type Tracker struct {
	last map[uint64]series
	// spare is the map before last, cleared and reused for the next collection's series.
	spare map[uint64]series
}

// series is what is needed to end one: where it lived and its identity.
type series struct {
	resource pcommon.Map
	scope    pcommon.InstrumentationScope
	metric   pmetric.Metric // name, description, unit and type, without data points
	attrs    pcommon.Map
}

// NewTracker returns a tracker that has seen nothing yet.
func NewTracker() *Tracker {
	return &Tracker{last: map[uint64]series{}}
}

// EndGone adds to md a NoRecordedValue point at now for each series of the previous call that
// md no longer has, and remembers md's series for the next call.
func (t *Tracker) EndGone(md pmetric.Metrics, now pcommon.Timestamp) {
	current := t.spare
	if current == nil {
		current = make(map[uint64]series, len(t.last))
	}
	var h xxhash.Digest
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				dps, ok := metricpoints.Numbers(m)
				if !ok {
					continue
				}
				for l := 0; l < dps.Len(); l++ {
					// A hash, not a concatenated string: a collection keys every one of its series.
					h.Reset()
					hashMap(&h, rm.Resource().Attributes())
					_, _ = h.Write(separator)
					_, _ = h.WriteString(sm.Scope().Name())
					_, _ = h.Write(separator)
					_, _ = h.WriteString(m.Name())
					_, _ = h.Write(separator)
					hashMap(&h, dps.At(l).Attributes())
					key := h.Sum64()
					if prev, seen := t.last[key]; seen {
						current[key] = prev
						continue
					}
					// Copied: md belongs to the pipeline once it is sent.
					s := series{resource: pcommon.NewMap(), scope: pcommon.NewInstrumentationScope(), metric: pmetric.NewMetric(), attrs: pcommon.NewMap()}
					rm.Resource().Attributes().CopyTo(s.resource)
					sm.Scope().CopyTo(s.scope)
					copyIdentity(m, s.metric)
					dps.At(l).Attributes().CopyTo(s.attrs)
					current[key] = s
				}
			}
		}
	}
	var ended []series
	for key, s := range t.last {
		if _, ok := current[key]; !ok {
			ended = append(ended, s)
		}
	}
	clear(t.last)
	t.last, t.spare = current, t.last
	if len(ended) > 0 {
		appendEnds(md, ended, now)
	}
}

// appendEnds adds the ended series as NoRecordedValue points, under their resource and scope.
// They go in resources of their own, after md's: the exporter keys series by resource
// attributes, not by position.
func appendEnds(md pmetric.Metrics, ended []series, now pcommon.Timestamp) {
	scopes := map[string]pmetric.ScopeMetrics{}
	metrics := map[string]pmetric.Metric{}
	for _, s := range ended {
		scopeKey := mapKey(s.resource) + "\x01" + s.scope.Name()
		sm, ok := scopes[scopeKey]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			s.resource.CopyTo(rm.Resource().Attributes())
			sm = rm.ScopeMetrics().AppendEmpty()
			s.scope.CopyTo(sm.Scope())
			scopes[scopeKey] = sm
		}
		metricKey := scopeKey + "\x01" + s.metric.Name()
		m, ok := metrics[metricKey]
		if !ok {
			m = sm.Metrics().AppendEmpty()
			s.metric.CopyTo(m)
			metrics[metricKey] = m
		}
		dps, _ := metricpoints.Numbers(m)
		dp := dps.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		s.attrs.CopyTo(dp.Attributes())
	}
}

// copyIdentity copies a metric without its data points.
func copyIdentity(from, to pmetric.Metric) {
	to.SetName(from.Name())
	to.SetDescription(from.Description())
	to.SetUnit(from.Unit())
	switch from.Type() {
	case pmetric.MetricTypeGauge:
		to.SetEmptyGauge()
	case pmetric.MetricTypeSum:
		sum := to.SetEmptySum()
		sum.SetIsMonotonic(from.Sum().IsMonotonic())
		sum.SetAggregationTemporality(from.Sum().AggregationTemporality())
	}
}

var (
	separator = []byte{1}
	equals    = []byte{'='}
	nul       = []byte{0}
)

// hashMap adds attributes to h by their content, in their order (as mapKey).
func hashMap(h *xxhash.Digest, attrs pcommon.Map) {
	for k, v := range attrs.All() {
		_, _ = h.WriteString(k)
		_, _ = h.Write(equals)
		if v.Type() == pcommon.ValueTypeStr {
			_, _ = h.WriteString(v.Str())
		} else {
			_, _ = h.WriteString(v.AsString())
		}
		_, _ = h.Write(nul)
	}
}

// mapKey identifies attributes by their content. They are taken in their order, not sorted:
// mdatagen's builders always put them in the same order.
func mapKey(attrs pcommon.Map) string {
	var b strings.Builder
	for k, v := range attrs.All() {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v.AsString())
		b.WriteByte(0)
	}
	return b.String()
}
