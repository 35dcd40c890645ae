// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

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
// instance: one NVML library, one event watcher, one kernel log reader, one XID count. A package
// variable, as contrib's receivers keep their sharedcomponent.Map and k8s_watchdog its registry:
// the key is the *Config both pipelines' receivers are made from, whatever factory value makes
// them.
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
	// amd is the amdgpu backend's scraper, instead of scraper.
	amd *amdScraper

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
	backend := resolveBackend(r.cfg)
	if r.cfg.Backend == BackendAuto {
		r.set.Logger.Info("GPU backend chosen", zap.String("backend", string(backend)), zap.String("root_path", r.cfg.RootPath))
	}
	if backend == BackendAMDGPU {
		// AMD GPUs have no XIDs: the logs pipeline gets nothing.
		r.amd = newAMDScraper(ss)
		if r.metrics != nil {
			return r.metrics.Start(ctx, host)
		}
		return nil
	}
	lib, release, err := openLibrary(r.cfg)
	if err != nil {
		return fmt.Errorf("backend %s: %w", r.cfg.Backend, err)
	}
	if r.nextLogs != nil {
		next := r.nextLogs
		ss.emitLogs = func(logs plog.Logs) {
			if err := next.ConsumeLogs(context.Background(), logs); err != nil {
				r.set.Logger.Warn("The logs pipeline refused an XID log record", zap.Error(err))
			}
		}
	}
	r.scraper = newScraper(ss, lib, release)
	r.startKmsg()
	r.scraper.start()
	if r.metrics != nil {
		return r.metrics.Start(ctx, host)
	}
	return nil
}

// simulatedKernelLog is the simulated driver's own kernel log.
type simulatedKernelLog interface{ KernelLog() (*os.File, error) }

// startKmsg follows the kernel log. The simulated backend reads its simulated driver's log
// unless xid::kmsg_path names a file: the machine's own kernel log has nothing to do with
// simulated GPUs.
func (r *gpuReceiver) startKmsg() {
	x := r.cfg.XID
	if !x.Kmsg {
		return
	}
	path := x.KmsgPath
	var f *os.File
	var err error
	switch sim, ok := r.scraper.lib.(simulatedKernelLog); {
	case path == "" && ok:
		path = "simulated"
		f, err = sim.KernelLog()
	case path == "" && r.cfg.Backend == BackendSimulated:
		return
	default:
		if path == "" {
			path = filepath.Join(r.cfg.RootPath, "dev", "kmsg")
		}
		f, err = openKmsg(path)
	}
	if err != nil {
		r.set.Logger.Warn("The kernel log cannot be read: XIDs come from NVML events only (run as root or give CAP_SYSLOG, or set xid::kmsg_path)", zap.String("path", path), zap.Error(err))
		return
	}
	s := r.scraper
	s.kmsg = f
	k := &kmsgReader{file: f, clock: s.clock, poll: time.Second, logger: r.set.Logger, onLine: s.onKmsgLine}
	s.wg.Go(func() {
		k.run(s.stop)
	})
}

func (r *gpuReceiver) scrape(context.Context) (pmetric.Metrics, error) {
	if r.amd != nil {
		return r.amd.scrape(), nil
	}
	return r.scraper.scrape(), nil
}

func (r *gpuReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() {
		if r.metrics != nil {
			err = r.metrics.Shutdown(ctx)
		}
		if r.scraper != nil {
			r.scraper.shutdown()
		}
		r.forget()
	})
	return err
}
