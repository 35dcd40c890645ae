// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import "time"

// refusedSeries remembers the keys of refused series in two generations, each as long as the
// expiration: a key seen in either is known; a key not seen for two generations is forgotten.
// Two maps swapped instead of a time per key: no sweep, and a known key costs one lookup.
type refusedSeries struct {
	lifetime        time.Duration
	current, before map[uint64]struct{}
	generationStart time.Time
}

func newRefusedSeries(lifetime time.Duration) refusedSeries {
	return refusedSeries{lifetime: lifetime, current: map[uint64]struct{}{}, before: map[uint64]struct{}{}}
}

// age starts a new generation when the current one is a lifetime old.
func (r *refusedSeries) age(now time.Time) {
	if r.generationStart.IsZero() {
		r.generationStart = now
		return
	}
	if now.Sub(r.generationStart) < r.lifetime {
		return
	}
	r.before, r.current = r.current, map[uint64]struct{}{}
	if now.Sub(r.generationStart) >= 2*r.lifetime {
		clear(r.before) // nothing arrived for a whole generation: what it held is old too
	}
	r.generationStart = now
}

// seen reports whether key was refused in either generation, keeping it known for another.
func (r *refusedSeries) seen(key uint64) bool {
	if _, ok := r.current[key]; ok {
		return true
	}
	if _, ok := r.before[key]; ok {
		r.current[key] = struct{}{}
		return true
	}
	return false
}

func (r *refusedSeries) add(key uint64) { r.current[key] = struct{}{} }
