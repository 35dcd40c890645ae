// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package metricpoints reaches a metric's data points whatever its number type.
package metricpoints // import "github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"

import "go.opentelemetry.io/collector/pdata/pmetric"

// Numbers are a gauge's or a sum's data points; false for the other types.
func Numbers(m pmetric.Metric) (pmetric.NumberDataPointSlice, bool) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints(), true
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints(), true
	default:
		return pmetric.NumberDataPointSlice{}, false
	}
}
