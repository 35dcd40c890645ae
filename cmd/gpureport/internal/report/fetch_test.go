// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeQuerier answers `name[range]` instant queries from stored samples, with the range's
// start included (Prometheus 2) or not (Prometheus 3).
type fakeQuerier struct {
	series    map[string][]model.SamplePair // by metric name
	leftOpen  bool
	warnings  v1.Warnings
	err       error
	queries   int
	wrongType bool
}

func (f *fakeQuerier) Query(_ context.Context, query string, ts time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	f.queries++
	if f.err != nil {
		return nil, nil, nil, f.err
	}
	if f.wrongType {
		return model.Vector{}, nil, nil, nil
	}
	name, rng, _ := strings.Cut(strings.TrimSuffix(query, "]"), "[")
	d, err := model.ParseDuration(rng)
	if err != nil {
		return nil, nil, nil, err
	}
	end := model.TimeFromUnixNano(ts.UnixNano())
	start := end.Add(-time.Duration(d))
	var values []model.SamplePair
	for _, p := range f.series[name] {
		if p.Timestamp <= end && (p.Timestamp > start || !f.leftOpen && p.Timestamp == start) {
			values = append(values, p)
		}
	}
	m := model.Matrix{}
	if len(values) > 0 {
		m = append(m, &model.SampleStream{Metric: model.Metric{"__name__": model.LabelValue(name), "uuid": "GPU-1"}, Values: values})
	}
	return m, f.warnings, nil, nil
}

func (*fakeQuerier) LabelValues(context.Context, string, []string, time.Time, time.Time, ...v1.Option) (model.LabelValues, v1.Warnings, v1.Infos, error) {
	return nil, nil, nil, errors.New("not used by the fetcher")
}

func everyMinute(from, to time.Time) []model.SamplePair {
	var out []model.SamplePair
	for t := from; !t.After(to); t = t.Add(time.Minute) {
		out = append(out, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: model.SampleValue(t.Minute())})
	}
	return out
}

func TestFetchJoinsChunksExactly(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(5 * time.Hour)
	stored := everyMinute(from.Add(-time.Hour), to.Add(time.Hour))
	for _, leftOpen := range []bool{false, true} {
		q := &fakeQuerier{series: map[string][]model.SamplePair{"gpu_up": stored}, leftOpen: leftOpen, warnings: v1.Warnings{"partial"}}
		got, warnings, err := fetcher{api: q, chunk: time.Hour}.raw(t.Context(), "gpu_up", from, to)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, model.Metric{"uuid": "GPU-1"}, got[0].labels, "without __name__")
		want := everyMinute(from, to)
		require.Len(t, got[0].samples, len(want), "every sample of [from, to] once (left-open ranges: %v)", leftOpen)
		for i, p := range want {
			assert.Equal(t, sample{int64(p.Timestamp), float64(p.Value)}, got[0].samples[i])
		}
		assert.Equal(t, 5, q.queries, "one query per chunk")
		assert.Len(t, warnings, 5)
		assert.Contains(t, warnings[0], "gpu_up[1h1ms] at 2026-01-01T01:00:00Z: partial")
	}
}

func TestFetchErrors(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, _, err := fetcher{api: &fakeQuerier{err: errors.New("connection refused")}, chunk: time.Hour}.raw(t.Context(), "gpu_up", from, from.Add(time.Hour))
	assert.ErrorContains(t, err, "query gpu_up[1h1ms] at 2026-01-01T01:00:00Z: connection refused")
	_, _, err = fetcher{api: &fakeQuerier{wrongType: true}, chunk: time.Hour}.raw(t.Context(), "gpu_up", from, from.Add(time.Hour))
	assert.ErrorContains(t, err, "want a range vector, got vector")
}
