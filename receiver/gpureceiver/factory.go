// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// NewFactory creates the gpu receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
		receiver.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = 10 * time.Second
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		Events:               metadata.DefaultEventsConfig(),
		Backend:              BackendAuto,
		RootPath:             "/",
		CallTimeout:          5 * time.Second,
		InitRetry:            InitRetryConfig{InitialInterval: 5 * time.Second, MaxInterval: 5 * time.Minute},
		MemoryLeakThreshold:  32 << 20,
		XID: XIDConfig{
			NVMLEvents:   true,
			Kmsg:         true,
			DedupWindow:  2 * time.Second,
			HealthWindow: time.Hour,
		},
		NodeCheck: NodeCheckConfig{Interval: 5 * time.Minute, Timeout: 30 * time.Second},
	}
}

// openLibrary returns the NVML interface of the configured backend and what releases it.
func openLibrary(cfg *Config) (nvml.Interface, func(), error) {
	if cfg.Backend == BackendSimulated {
		sc, err := simulated.Load(cfg.Scenario)
		if err != nil {
			return nil, nil, err
		}
		srv := simulated.New(sc, clock.Real{}, simulated.WithHostRoot(cfg.RootPath))
		return srv, srv.Close, nil
	}
	var opts []nvml.LibraryOption
	if cfg.LibraryPath != "" {
		opts = append(opts, nvml.WithLibraryPath(cfg.LibraryPath))
	}
	// nvml.New only records the path: the library is opened by Init, at Start.
	return nvml.New(opts...), func() {}, nil
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	r := sharedReceiver(c, set)
	sc, err := scraper.NewMetrics(r.scrape)
	if err != nil {
		return nil, err
	}
	if r.metrics, err = scraperhelper.NewMetricsController(&c.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, sc)); err != nil {
		return nil, err
	}
	return r, nil
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	r := sharedReceiver(cfg.(*Config), set)
	r.nextLogs = next
	return r, nil
}
