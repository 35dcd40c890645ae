// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package latency is the cumulative latency histogram of an external source (NVML, the
// Kubernetes API server, …): cmd_nvml_latency_seconds, k8s_api_*_latency_seconds.
//
// These are the only metrics not declared in a metadata.yaml: mdatagen v0.159.0 builds gauges
// and sums for the pipeline, and histograms only for the collector's own telemetry, which goes
// to the telemetry endpoint rather than to the Prometheus exporter the contract is served from.
package latency // import "github.com/otelcol-gpu/otelcol-gpu/internal/latency"

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Bounds reach 120 s: OpenPAI's histograms stopped at 10 s, so a hung driver or API server was
// invisible to histogram_quantile; the contract asks for at least 60 s.
var Bounds = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}

// Histogram accumulates durations into cumulative buckets. It is safe for concurrent use:
// observations come from collection loops, informers and calls that return late.
type Histogram struct {
	name, description string
	start             pcommon.Timestamp

	mu     sync.Mutex
	counts []uint64 // len(Bounds)+1, the last one is the +Inf bucket
	count  uint64
	sum    float64
}

// New returns an empty histogram named as Prometheus will show it, counting from start.
func New(name, description string, start time.Time) *Histogram {
	return &Histogram{
		name:        name,
		description: description,
		start:       pcommon.NewTimestampFromTime(start),
		counts:      make([]uint64, len(Bounds)+1),
	}
}

// Observe records one call's duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(Bounds) && s > Bounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.count++
	h.sum += s
	h.mu.Unlock()
}

// AppendTo adds the histogram's cumulative state to ms as one data point at now.
func (h *Histogram) AppendTo(ms pmetric.MetricSlice, now pcommon.Timestamp) {
	m := ms.AppendEmpty()
	m.SetName(h.name)
	m.SetDescription(h.description)
	m.SetUnit("s")
	hist := m.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := hist.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(h.start)
	dp.SetTimestamp(now)
	dp.ExplicitBounds().FromRaw(Bounds)
	h.mu.Lock()
	defer h.mu.Unlock()
	dp.BucketCounts().FromRaw(h.counts)
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
}

// AppendToScope adds hs to the scope a metrics builder emitted md's first resource into. When
// every declared metric is disabled md is empty, and the histograms get a resource res of their
// own with the component's scope name and version, so they are never lost with the gauges.
func AppendToScope(md pmetric.Metrics, res pcommon.Resource, scopeName, version string, now pcommon.Timestamp, hs ...*Histogram) {
	var sm pmetric.ScopeMetrics
	if md.ResourceMetrics().Len() > 0 && md.ResourceMetrics().At(0).ScopeMetrics().Len() > 0 {
		sm = md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	} else {
		rm := md.ResourceMetrics().AppendEmpty()
		res.CopyTo(rm.Resource())
		sm = rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(scopeName)
		sm.Scope().SetVersion(version)
	}
	for _, h := range hs {
		h.AppendTo(sm.Metrics(), now)
	}
}
