// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report // import "github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"

import "slices"

// sample is one raw sample of a series: a time in Unix milliseconds (Prometheus's resolution)
// and its value.
type sample struct {
	t int64
	v float64
}

// segment is a stretch of time [start, end) in Unix milliseconds during which a series held one
// value.
type segment struct {
	start, end int64
	v          float64
}

func (s segment) duration() int64 { return s.end - s.start }

// timeline is what a gauge's raw samples say about a window: the known stretches, each with its
// value, and the time inside the series' life that no sample covers.
type timeline struct {
	segments []segment
	// unknownMs is time between two samples further apart than the maximum gap (an agent down,
	// a failed scrape): the series existed before and after, but nobody knows its value.
	unknownMs int64
}

// window is the report's period [start, end) in Unix milliseconds.
type window struct{ start, end int64 }

func (w window) clip(start, end int64) (int64, int64, bool) {
	start, end = max(start, w.start), min(end, w.end)
	return start, end, start < end
}

// stepTimeline integrates raw samples by time, never by count, so that it is exact whatever the
// scrape interval and wherever it changes:
//
//   - a sample holds its value from its own time until the next sample, when the next sample
//     comes within maxGap;
//   - the last sample of a run (the series ends, or the next sample is further than maxGap)
//     holds for the interval that preceded it, the run's own scrape interval; a run of n
//     samples at a constant interval d therefore covers n·d, what counting samples gives;
//     a run of a single sample covers nothing, having no interval to go by;
//   - the rest of a gap longer than maxGap is unknown time;
//   - everything is clipped to the window.
//
// samples must be sorted by time without duplicates.
func stepTimeline(samples []sample, w window, maxGap int64) timeline {
	tl := timeline{segments: make([]segment, 0, len(samples))}
	for i, s := range samples {
		var end int64
		if i+1 < len(samples) && samples[i+1].t-s.t <= maxGap {
			end = samples[i+1].t
		} else {
			end = s.t
			if i > 0 && s.t-samples[i-1].t <= maxGap {
				end += s.t - samples[i-1].t
			}
			if i+1 < len(samples) {
				if a, b, ok := w.clip(end, samples[i+1].t); ok {
					tl.unknownMs += b - a
				}
			}
		}
		if a, b, ok := w.clip(s.t, end); ok {
			tl.segments = append(tl.segments, segment{a, b, s.v})
		}
	}
	return tl
}

// knownMs is the time the timeline covers.
func (tl timeline) knownMs() int64 {
	var ms int64
	for _, s := range tl.segments {
		ms += s.duration()
	}
	return ms
}

// counterIncrease is how much a counter (or a gauge that only grows until it is reset, such as
// volatile ECC totals) grew at samples inside the window: a drop is a reset, after which the new
// value is all increase; a series whose first sample lies inside the window started there, from
// zero, as a counter does when the collector creates it on the first event.
func counterIncrease(samples []sample, w window) float64 {
	var inc float64
	for i, s := range samples {
		if s.t < w.start || s.t >= w.end {
			continue
		}
		switch {
		case i == 0 || s.v < samples[i-1].v:
			inc += s.v
		default:
			inc += s.v - samples[i-1].v
		}
	}
	return inc
}

// intersect pairs two timelines' segments where both are known, calling f with each shared
// stretch and both values. Both segment lists are sorted and non-overlapping.
func intersect(a, b []segment, f func(start, end int64, va, vb float64)) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		start, end := max(a[i].start, b[j].start), min(a[i].end, b[j].end)
		if start < end {
			f(start, end, a[i].v, b[j].v)
		}
		if a[i].end < b[j].end {
			i++
		} else {
			j++
		}
	}
}

// timeAtValue is how long a series (or a group of them) held each value, in milliseconds:
// enough for a time-weighted median without keeping the series, and small, since utilization
// takes few distinct values.
type timeAtValue map[float64]int64

func (tv timeAtValue) add(segments []segment) {
	for _, s := range segments {
		tv[s.v] += s.duration()
	}
}

// median is the smallest value v such that at least half of the time was spent at or below v;
// zero for no time.
func (tv timeAtValue) median() float64 {
	values := make([]float64, 0, len(tv))
	var total int64
	for v, ms := range tv {
		values = append(values, v)
		total += ms
	}
	slices.Sort(values)
	var cum int64
	for _, v := range values {
		cum += tv[v]
		if 2*cum >= total {
			return v
		}
	}
	return 0
}

// bucketAverages is the time-weighted mean value of the segments in each of n buckets of width
// ms from start, and the known time in each (zero known time: no value).
func bucketAverages(segments []segment, start, width int64, n int, sum, known []float64) {
	for _, s := range segments {
		for b := max(0, int((s.start-start)/width)); b < n; b++ {
			bs := start + int64(b)*width
			a, e := max(s.start, bs), min(s.end, bs+width)
			if a >= e {
				if bs >= s.end {
					break
				}
				continue
			}
			sum[b] += float64(e-a) * s.v
			known[b] += float64(e - a)
		}
	}
}
