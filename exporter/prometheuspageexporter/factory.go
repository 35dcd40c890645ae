// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// NewFactory returns the prometheus_page exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithMetrics(createMetricsExporter, metadata.MetricsStability))
}

func createMetricsExporter(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	e, err := newPageExporter(cfg.(*Config), set, clock.Real{})
	if err != nil {
		return nil, err
	}
	// No queue: a batch is rendered as it arrives, which is the point of this exporter.
	return exporterhelper.NewMetrics(ctx, set, cfg, e.consumeMetrics,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
	)
}
