// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/nodename"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
)

// receivers gives the metrics and the logs pipeline of one configured receiver the same
// instance: one backend (one NVML library, one event watcher, one kernel log reader, one XID
// count). A package variable, as contrib's receivers keep their sharedcomponent.Map and
// k8s_watchdog its registry: the key is the *Config both pipelines' receivers are made from,
// whatever factory value makes them.
var receivers sharedcomponent.Registry[*Config, *gpuReceiver]

func sharedReceiver(cfg *Config, set receiver.Settings) *gpuReceiver {
	return receivers.GetOrCreate(cfg, func() *gpuReceiver {
		r := &gpuReceiver{cfg: cfg, set: set}
		r.forget = func() { receivers.Forget(cfg, r) }
		return r
	})
}

// gpuReceiver is the component both pipelines get; Start and Shutdown run once.
type gpuReceiver struct {
	cfg    *Config
	set    receiver.Settings
	forget func()

	// metrics is the scrape controller, nil without a metrics pipeline.
	metrics  receiver.Metrics
	nextLogs consumer.Logs
	scraper  *gpuScraper

	startOnce, stopOnce sync.Once
	startErr            error
}

func (r *gpuReceiver) Start(ctx context.Context, host component.Host) error {
	r.startOnce.Do(func() { r.startErr = r.start(ctx, host) })
	return r.startErr
}

func (r *gpuReceiver) start(ctx context.Context, host component.Host) error {
	nodeName, err := nodename.Resolve(r.cfg.NodeName)
	if err != nil {
		return err
	}
	ss := scraperSettings{cfg: r.cfg, set: r.set, nodeName: nodeName, clock: clock.Real{}}
	var check *nodeChecker
	if r.cfg.NodeCheck.Enabled {
		if check, err = newNodeChecker(ss); err != nil {
			return err
		}
	}
	kind := resolveBackend(r.cfg)
	if r.cfg.Backend == BackendAuto {
		r.set.Logger.Info("GPU backend chosen", zap.String("backend", string(kind)), zap.String("root_path", r.cfg.RootPath))
	}
	b, err := newBackend(ss, kind)
	if err != nil {
		return fmt.Errorf("backend %s: %w", r.cfg.Backend, err)
	}
	var events func(plog.Logs)
	if r.nextLogs != nil {
		next := r.nextLogs
		events = func(logs plog.Logs) {
			if err := next.ConsumeLogs(context.Background(), logs); err != nil {
				r.set.Logger.Warn("The logs pipeline refused an XID log record", zap.Error(err))
			}
		}
	}
	r.scraper = newScraper(ss, b)
	r.scraper.check = check
	b.start(events)
	if check != nil {
		check.start()
	}
	if r.metrics != nil {
		return r.metrics.Start(ctx, host)
	}
	return nil
}

func (r *gpuReceiver) scrape(context.Context) (pmetric.Metrics, error) {
	return r.scraper.scrape(), nil
}

func (r *gpuReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() {
		if r.metrics != nil {
			err = r.metrics.Shutdown(ctx)
		}
		if r.scraper != nil {
			if r.scraper.check != nil {
				r.scraper.check.shutdown()
			}
			r.scraper.backend.shutdown()
		}
		r.forget()
	})
	return err
}
