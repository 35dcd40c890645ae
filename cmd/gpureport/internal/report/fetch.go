// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// series is one series' labels (without __name__) and its raw samples, sorted by time.
type series struct {
	labels  model.Metric
	samples []sample
}

// fetcher reads raw samples through the Prometheus HTTP API: instant queries of range vectors
// (`selector[chunk]`), which return every stored sample rather than values resampled at a step,
// in chunks so that no answer grows past the server's sample limit.
type fetcher struct {
	api   querier
	chunk time.Duration
}

// querier is the part of the Prometheus API client that the report uses.
type querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, error)
	LabelValues(ctx context.Context, label string, matches []string, startTime, endTime time.Time, opts ...v1.Option) (model.LabelValues, v1.Warnings, error)
}

// raw returns every series matching selector with its samples in [from, to], joined across
// chunks and without duplicates (Prometheus 2 includes both ends of a range, 3 only the last),
// and the server's warnings (a partial answer, for one).
func (f fetcher) raw(ctx context.Context, selector string, from, to time.Time) ([]series, []string, error) {
	var warnings []string
	bySeries := map[model.Fingerprint]*series{}
	// Each range reaches a millisecond into the one before, so that a left-open range (Prometheus
	// 3) still holds the sample at its start; the overlap is dropped below.
	rangeSel := fmt.Sprintf("%s[%s]", selector, model.Duration(f.chunk+time.Millisecond))
	for at := from.Add(f.chunk); ; at = at.Add(f.chunk) {
		evalAt := at
		if evalAt.After(to) {
			evalAt = to
		}
		val, warns, err := f.api.Query(ctx, rangeSel, evalAt)
		at := evalAt.UTC().Format(time.RFC3339)
		if err != nil {
			return nil, nil, fmt.Errorf("query %s at %s: %w", rangeSel, at, err)
		}
		for _, w := range warns {
			warnings = append(warnings, fmt.Sprintf("query %s at %s: %s", rangeSel, at, w))
		}
		matrix, ok := val.(model.Matrix)
		if !ok {
			return nil, nil, fmt.Errorf("query %s: want a range vector, got %s", rangeSel, val.Type())
		}
		for _, ss := range matrix {
			labels := ss.Metric.Clone()
			delete(labels, model.MetricNameLabel)
			fp := labels.Fingerprint()
			s := bySeries[fp]
			if s == nil {
				s = &series{labels: labels}
				bySeries[fp] = s
			}
			for _, p := range ss.Values {
				t := int64(p.Timestamp)
				if t < from.UnixMilli() || t > to.UnixMilli() {
					continue
				}
				if n := len(s.samples); n > 0 && s.samples[n-1].t >= t {
					continue // the end of the previous chunk
				}
				s.samples = append(s.samples, sample{t, float64(p.Value)})
			}
		}
		if !evalAt.Before(to) {
			break
		}
	}
	out := make([]series, 0, len(bySeries))
	for _, s := range bySeries {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].labels.String() < out[j].labels.String() })
	return out, warnings, nil
}
