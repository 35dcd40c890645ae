// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import "testing"

// FuzzStepTimeline checks what must hold for any samples: known and unknown stretches lie in
// the window, in order, never overlap, and carry a sample's value; a counter never shrinks.
func FuzzStepTimeline(f *testing.F) {
	f.Add([]byte{30, 1, 30, 2, 200, 3, 30, 4}, int64(10), int64(400), int64(100))
	f.Add([]byte{1, 0, 1, 0}, int64(0), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, start, length, maxGap int64) {
		if length <= 0 || maxGap <= 0 || length > 1<<40 || start < -(1<<40) || start > 1<<40 {
			return
		}
		var samples []sample
		values := map[float64]bool{}
		// Two bytes a sample: the step from the previous one (1–256 ms) and a value.
		var at int64
		for ; len(data) >= 2; data = data[2:] {
			at += int64(data[0]) + 1
			v := float64(data[1] % 101)
			samples = append(samples, sample{at, v})
			values[v] = true
		}
		w := window{start, start + length}
		tl := stepTimeline(samples, w, maxGap)
		prevEnd := w.start
		for _, s := range tl.segments {
			if s.start < prevEnd || s.end <= s.start || s.end > w.end {
				t.Fatalf("segment %+v out of order or out of %+v (previous end %d)", s, w, prevEnd)
			}
			if !values[s.v] {
				t.Fatalf("segment %+v has a value no sample had", s)
			}
			prevEnd = s.end
		}
		if tl.unknownMs < 0 || tl.knownMs()+tl.unknownMs > length {
			t.Fatalf("known %d + unknown %d > window %d", tl.knownMs(), tl.unknownMs, length)
		}
		if inc := counterIncrease(samples, w); inc < 0 {
			t.Fatalf("counter increase %v < 0", inc)
		}
	})
}
