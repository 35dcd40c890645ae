// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
)

// NewMetricsBuilder is what mdatagen (v0.159.0) generates for receivers, scrapers and connectors
// only, although it generates the builder and its tests for a processor that declares metrics.
func NewMetricsBuilder(mbc MetricsBuilderConfig, settings processor.Settings, options ...MetricBuilderOption) *MetricsBuilder {
	mb := &MetricsBuilder{
		config:                               mbc,
		startTime:                            pcommon.NewTimestampFromTime(time.Now()),
		metricsBuffer:                        pmetric.NewMetrics(),
		buildInfo:                            settings.BuildInfo,
		metricDCGMFIDEVNVLINKBANDWIDTHTOTAL:  newMetricDCGMFIDEVNVLINKBANDWIDTHTOTAL(mbc.Metrics.DCGMFIDEVNVLINKBANDWIDTHTOTAL),
		metricDCGMFIDEVNVLINKTHROUGHPUTTOTAL: newMetricDCGMFIDEVNVLINKTHROUGHPUTTOTAL(mbc.Metrics.DCGMFIDEVNVLINKTHROUGHPUTTOTAL),
		metricDCGMFIDEVXIDERROR:              newMetricDCGMFIDEVXIDERROR(mbc.Metrics.DCGMFIDEVXIDERROR),
		metricDCGMFIDEVXIDERRORS:             newMetricDCGMFIDEVXIDERRORS(mbc.Metrics.DCGMFIDEVXIDERRORS),
	}
	for _, op := range options {
		op.apply(mb)
	}
	return mb
}
