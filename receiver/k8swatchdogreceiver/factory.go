// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// NewFactory creates the k8s_watchdog receiver factory.
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
	// The metrics are read from the informers' caches, so collecting often is cheap; only the
	// /healthz probe goes to the API server on each collection.
	cc.CollectionInterval = 30 * time.Second
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		LogsBuilderConfig:    metadata.DefaultLogsBuilderConfig(),
		AuthType:             kubeclient.AuthTypeServiceAccount,
		// 5,000 pods sync in under a second; the bound is what a gateway start waits when the API
		// server is down (the cache-based metrics are withheld until the informers sync anyway).
		SyncTimeout:      10 * time.Second,
		HealthzTimeout:   10 * time.Second,
		GPUResourceNames: []string{"nvidia.com/gpu", "amd.com/gpu"},
		ServiceLabel:     "app",
		JobNameSources: []JobNameSource{
			{Label: "jobName"},                        // OpenPAI before v1.0
			{Env: "PAI_JOB_NAME"},                     // OpenPAI v1.x: only the containers' environment has it
			{Label: "batch.kubernetes.io/job-name"},   // Kubernetes Jobs
			{Label: "training.kubeflow.org/job-name"}, // Kubeflow training operator
			{Label: "volcano.sh/job-name"},            // Volcano
		},
	}
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	w := sharedWatchdog(c, set)
	s, err := scraper.NewMetrics(w.scrape, scraper.WithStart(w.start), scraper.WithShutdown(w.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&c.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, s))
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	w := sharedWatchdog(cfg.(*Config), set)
	w.logs = next
	return logsReceiver{w}, nil
}

// logsReceiver is the logs face of a watchdog; the metrics face is the scraper controller.
type logsReceiver struct{ w *watchdog }

func (r logsReceiver) Start(ctx context.Context, host component.Host) error {
	return r.w.start(ctx, host)
}

func (r logsReceiver) Shutdown(ctx context.Context) error { return r.w.shutdown(ctx) }

// watchdogs shares one watchdog between the metrics and the logs receiver of one component: the
// collector creates both from the same *Config, and two sets of informers would list and watch
// the whole cluster twice. A package variable, as contrib's receivers keep their
// sharedcomponent.Map and the gpu receiver its registry.
var watchdogs sharedcomponent.Registry[*Config, *watchdog]

func sharedWatchdog(cfg *Config, set receiver.Settings) *watchdog {
	return watchdogs.GetOrCreate(cfg, func() *watchdog {
		w := newWatchdog(cfg, set)
		w.release = func() { watchdogs.Forget(cfg, w) }
		return w
	})
}
