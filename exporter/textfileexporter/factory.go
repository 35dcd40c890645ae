// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package textfileexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter/internal/metadata"
)

// NewFactory returns the textfile exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithMetrics(createMetricsExporter, metadata.MetricsStability))
}

func createMetricsExporter(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	e, err := newTextfileExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consumeMetrics,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		// The prometheus exporter inside converts resource attributes in place.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
	)
}
