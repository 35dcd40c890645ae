// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func ms(s ...int64) []sample {
	out := make([]sample, len(s)/2)
	for i := range out {
		out[i] = sample{s[2*i], float64(s[2*i+1])}
	}
	return out
}

func TestStepTimeline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []sample
		w       window
		want    timeline
	}{
		{
			name:    "interval change: each sample holds until the next",
			samples: ms(0, 10, 30, 20, 60, 30, 120, 40, 180, 50),
			w:       window{0, 1000},
			// The last sample holds for the interval before it (60).
			want: timeline{segments: []segment{{0, 30, 10}, {30, 60, 20}, {60, 120, 30}, {120, 180, 40}, {180, 240, 50}}},
		},
		{
			name:    "gap longer than max gap is unknown after the run's last interval",
			samples: ms(0, 1, 30, 2, 500, 3, 530, 4),
			w:       window{0, 1000},
			want:    timeline{segments: []segment{{0, 30, 1}, {30, 60, 2}, {500, 530, 3}, {530, 560, 4}}, unknownMs: 440},
		},
		{
			name:    "clipped to the window, unknown too",
			samples: ms(0, 1, 30, 2, 500, 3, 530, 4),
			w:       window{45, 510},
			want:    timeline{segments: []segment{{45, 60, 2}, {500, 510, 3}}, unknownMs: 440},
		},
		{
			name:    "a lone sample covers nothing",
			samples: ms(0, 7),
			w:       window{0, 1000},
			want:    timeline{segments: []segment{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, stepTimeline(tc.samples, tc.w, 100))
		})
	}
}

func TestCounterIncrease(t *testing.T) {
	w := window{100, 1000}
	assert.Equal(t, 0.0, counterIncrease(ms(0, 5, 100, 5, 200, 5), w), "flat")
	assert.Equal(t, 4.0, counterIncrease(ms(0, 5, 100, 6, 200, 9), w), "growth from the sample before the window")
	assert.Equal(t, 3.0, counterIncrease(ms(0, 5, 200, 7, 300, 1, 1000, 9), w), "reset, and a sample at the end is outside")
	assert.Equal(t, 2.0, counterIncrease(ms(300, 2), w), "a series born in the window counts from zero")
	assert.Equal(t, 0.0, counterIncrease(ms(0, 2, 50, 3), w), "before the window")
}

func TestTimeMedian(t *testing.T) {
	median := func(segments ...segment) float64 {
		tv := timeAtValue{}
		tv.add(segments)
		return tv.median()
	}
	assert.Equal(t, 0.0, median())
	assert.Equal(t, 5.0, median(segment{0, 10, 9}, segment{10, 30, 5}, segment{30, 31, 0}))
	// Exactly half the time at or below 1: the median is 1.
	assert.Equal(t, 1.0, median(segment{0, 10, 1}, segment{10, 20, 3}))
	// Time at one value adds up across segments.
	assert.Equal(t, 2.0, median(segment{0, 4, 2}, segment{4, 10, 7}, segment{10, 14, 2}))
}

func TestIntersect(t *testing.T) {
	var got []segment
	intersect([]segment{{0, 10, 1}, {20, 40, 2}}, []segment{{5, 25, 7}, {30, 50, 8}}, func(s, e int64, a, b float64) {
		got = append(got, segment{s, e, a*10 + b})
	})
	assert.Equal(t, []segment{{5, 10, 17}, {20, 25, 27}, {30, 40, 28}}, got)
}

func TestBucketAverages(t *testing.T) {
	sum, known := make([]float64, 3), make([]float64, 3)
	bucketAverages([]segment{{0, 15, 10}, {15, 20, 40}, {25, 30, 0}}, 0, 10, 3, sum, known)
	assert.Equal(t, []float64{100, 5*10 + 5*40, 0}, sum)
	assert.Equal(t, []float64{10, 10, 5}, known)
}
