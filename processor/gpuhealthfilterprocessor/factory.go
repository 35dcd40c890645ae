// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuhealthfilterprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/healthdata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuhealthfilterprocessor/internal/metadata"
)

// NewFactory creates the gpu_health_filter processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return &Config{} },
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
	)
}

// It removes in place.
var mutates = processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true})

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	return processorhelper.NewMetrics(ctx, set, cfg, next, func(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
		healthdata.KeepMetrics(md)
		if md.ResourceMetrics().Len() == 0 {
			// A batch without GPU health (a task collection) goes no further.
			return md, processorhelper.ErrSkipProcessingData
		}
		return md, nil
	}, mutates)
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	return processorhelper.NewLogs(ctx, set, cfg, next, func(_ context.Context, ld plog.Logs) (plog.Logs, error) {
		healthdata.KeepLogs(ld)
		if ld.ResourceLogs().Len() == 0 {
			return ld, processorhelper.ErrSkipProcessingData
		}
		return ld, nil
	}, mutates)
}
