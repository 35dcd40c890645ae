// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// errDeadline is what a guarded call returns when it passed call_timeout. NVML's own
// ERROR_TIMEOUT means "a wait timed out", which is what happened from the caller's side.
const errDeadline = nvml.ERROR_TIMEOUT

// lane serialises a hung call with the calls after it: while a call that passed its deadline
// is still running (a cgo call cannot be cancelled), calls on the same lane are refused instead
// of piling up goroutines stuck in the driver. Each GPU has a lane; Init, the device count and
// Shutdown share the library's lane.
type lane struct {
	hung atomic.Bool
}

// guarded runs f with a deadline and records its latency. A late call keeps running in its
// goroutine; the lane stays hung until it returns, and its latency is recorded then, so the
// histogram shows how long hung calls really took.
func guarded[T any](l *lane, timeout time.Duration, hist *latencyHistogram, f func() (T, nvml.Return)) (T, nvml.Return) {
	var zero T
	if l.hung.Load() {
		return zero, errDeadline
	}
	type result struct {
		v   T
		ret nvml.Return
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		v, ret := f()
		hist.observe(time.Since(start))
		done <- result{v, ret}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.ret
	case <-timer.C:
		l.hung.Store(true)
		go func() {
			<-done
			l.hung.Store(false)
		}()
		return zero, errDeadline
	}
}

// latencyBounds reach past 60 s, as the metric contract asks, so a hung driver shows as such.
var latencyBounds = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120}

// latencyHistogram is cmd_nvml_latency_seconds. mdatagen (v0.159) declares histograms only
// for the collector's own telemetry, which goes to the collector's telemetry endpoint rather
// than down the pipeline, so this one metric is built here by hand, next to the generated ones.
type latencyHistogram struct {
	start pcommon.Timestamp

	mu      sync.Mutex
	buckets []uint64
	count   uint64
	sum     float64
}

func newLatencyHistogram(start time.Time) *latencyHistogram {
	return &latencyHistogram{start: pcommon.NewTimestampFromTime(start), buckets: make([]uint64, len(latencyBounds)+1)}
}

func (h *latencyHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBounds) && s > latencyBounds[i] {
		i++
	}
	h.mu.Lock()
	h.buckets[i]++
	h.count++
	h.sum += s
	h.mu.Unlock()
}

// appendTo adds the cumulative histogram to a node-level metric slice.
func (h *latencyHistogram) appendTo(ms pmetric.MetricSlice, now pcommon.Timestamp) {
	m := ms.AppendEmpty()
	m.SetName("cmd_nvml_latency_seconds")
	m.SetDescription("Latency of NVML calls, hung ones included once they return.")
	m.SetUnit("s")
	hist := m.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := hist.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(h.start)
	dp.SetTimestamp(now)
	dp.ExplicitBounds().FromRaw(latencyBounds)
	h.mu.Lock()
	defer h.mu.Unlock()
	dp.BucketCounts().FromRaw(h.buckets)
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
}
