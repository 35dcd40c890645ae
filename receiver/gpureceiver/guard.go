// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
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
func guarded[T any](l *lane, timeout time.Duration, hist *latency.Histogram, f func() (T, nvml.Return)) (T, nvml.Return) {
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
		hist.Observe(time.Since(start))
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
