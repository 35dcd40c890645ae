// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metricpoints

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestNumbers(t *testing.T) {
	gauge := pmetric.NewMetric()
	gauge.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(3)
	sum := pmetric.NewMetric()
	sum.SetEmptySum().DataPoints().AppendEmpty().SetDoubleValue(1.5)
	hist := pmetric.NewMetric()
	hist.SetEmptyHistogram().DataPoints().AppendEmpty()

	pts, ok := Numbers(gauge)
	assert.True(t, ok)
	assert.Equal(t, int64(3), pts.At(0).IntValue())
	pts, ok = Numbers(sum)
	assert.True(t, ok)
	assert.Equal(t, 1.5, pts.At(0).DoubleValue())
	_, ok = Numbers(hist)
	assert.False(t, ok, "a histogram has no number points")
}
