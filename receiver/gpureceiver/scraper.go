// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// collectorName is the name label of collector_iteration_count_total.
const collectorName = "gpu"

// scraperSettings is what a scraper needs besides the library.
type scraperSettings struct {
	cfg      *Config
	set      receiver.Settings
	nodeName string
	// clock times everything: timestamps, the NVML calls' deadlines, the Init retries, the
	// pauses of the event watcher and of the kernel log reader.
	clock clock.Clock
	// emitLogs receives the XID log records; nil without a logs pipeline.
	emitLogs func(plog.Logs)
}

// gpuScraper is the one instance behind a configured receiver's metrics and logs pipelines. It
// owns the NVML library (Init with retry and backoff, the XID event watcher, Shutdown), the GPU
// list and the scrape's state. Nothing calls the library before Init succeeded.
type gpuScraper struct {
	// Set at construction, read-only after.
	cfg      *Config
	logger   *zap.Logger
	nodeName string
	// version is the collector's, set on the scope the histogram gets when no gauge is enabled.
	version string
	clock   clock.Clock
	lib     nvml.Interface
	newMB   func() *metadata.MetricsBuilder
	// release frees what the backend holds (the simulation's blocked calls and event wait).
	release func()

	// Every NVML call runs under guard (call_timeout, its latency into hist): a GPU's on that
	// GPU's lane (callGPU), the library's own on libLane (callLibrary).
	guard   deadline.Guard
	hist    *latency.Histogram
	libLane deadline.Lane

	// The library's lifecycle. ready is set once Init succeeded; driver and symbols are written
	// before it and read-only after.
	ready   atomic.Bool
	driver  string
	symbols map[string]bool
	// nvmlHolds counts who still uses the library after Init: the scraper until its shutdown,
	// the event watcher until its wait returns, each GPM sample buffer until it is freed. The
	// last to let go shuts NVML down, so neither the event set nor a sample buffer is freed, nor
	// the library shut down, under a call that still runs.
	nvmlHolds atomic.Int32
	// stop ends the goroutines: wg has the Init retries and the kernel log reader; watcher the
	// XID event watcher, apart: shutdown cannot wake NVML's event wait, so it does not wait for
	// it (tests do). kmsg is the kernel log being followed, closed at shutdown to wake its read.
	stop    chan struct{}
	wg      sync.WaitGroup
	watcher sync.WaitGroup
	kmsg    *os.File

	// gpus is touched by the scrape and enumeration only, under enumMu (scrapes never overlap);
	// identities is its published copy for the XID goroutines.
	enumMu     sync.Mutex
	gpus       []*gpuState
	identities atomic.Pointer[[]*gpuIdentity]
	xids       *xidTracker

	// The node-level part of the scrape, touched only by the scrape. stale ends the series a
	// collection no longer has: a process that left the GPU, a health condition that cleared, a
	// reading a lost GPU no longer gives.
	nodeMB     *metadata.MetricsBuilder
	iterations int64
	stale      *staleness.Tracker
}

func newScraper(ss scraperSettings, lib nvml.Interface, release func()) *gpuScraper {
	cfg := ss.cfg
	hist := latency.New("cmd_nvml_latency_seconds", "Latency of NVML calls, hung ones included once they return.", ss.clock.Now())
	s := &gpuScraper{
		cfg:      cfg,
		logger:   ss.set.Logger,
		nodeName: ss.nodeName,
		version:  ss.set.BuildInfo.Version,
		clock:    ss.clock,
		lib:      lib,
		newMB:    func() *metadata.MetricsBuilder { return metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, ss.set) },
		release:  release,
		guard:    deadline.Guard{Timeout: cfg.CallTimeout, Observe: hist.Observe, Clock: ss.clock},
		hist:     hist,
		stop:     make(chan struct{}),
		stale:    staleness.NewTracker(),
	}
	s.xids = &xidTracker{
		table:        xid.New(cfg.XID.Table),
		dedupWindow:  cfg.XID.DedupWindow,
		healthWindow: cfg.XID.HealthWindow,
		clock:        ss.clock,
		logger:       ss.set.Logger,
		resource:     s.resource,
		emit:         ss.emitLogs,
		lb:           metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: cfg.Events, ResourceAttributes: cfg.ResourceAttributes}, ss.set),
		counts:       map[string]map[uint64]int64{},
		health:       map[string][]healthMark{},
	}
	s.nodeMB = s.newMB()
	return s
}

// resource is the node's resource, or a GPU's when id is set.
func (s *gpuScraper) resource(id *gpuIdentity) pcommon.Resource {
	rb := metadata.NewResourceBuilder(s.cfg.ResourceAttributes)
	rb.SetNodeName(s.nodeName)
	if s.cfg.Backend == BackendSimulated {
		rb.SetSimulated("true")
	}
	if id != nil {
		rb.SetMinorNumber(strconv.Itoa(id.index))
		rb.SetUUID(id.uuid)
	}
	return rb.Emit()
}

// scrape collects every GPU in parallel; a GPU that hangs or is lost costs at most one
// call_timeout and never holds back the others.
func (s *gpuScraper) scrape() pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(s.clock.Now())
	s.iterations++
	nodeMB := s.nodeMB
	var gpuMetrics []pmetric.Metrics
	if s.ready.Load() {
		nodeMB.RecordGpuNvmlUpDataPoint(now, 1)
		s.enumMu.Lock()
		if ret := s.enumerate(); ret == nvml.SUCCESS {
			nodeMB.RecordGpuDevicesDetectedDataPoint(now, int64(len(s.gpus)))
		} else {
			// Without a device count the known GPUs are reported down, with their labels.
			for _, st := range s.gpus {
				st.handleErr = ret
			}
		}
		var wg sync.WaitGroup
		for _, st := range s.gpus {
			wg.Go(func() { s.collectGPU(st, now) })
		}
		wg.Wait()
		for _, st := range s.gpus {
			gpuMetrics = append(gpuMetrics, st.mb.Emit(metadata.WithResource(s.resource(st.id))))
		}
		s.enumMu.Unlock()
	} else {
		nodeMB.RecordGpuNvmlUpDataPoint(now, 0)
	}
	if c := s.cfg.ConfiguredGPUCount; c != nil {
		nodeMB.RecordConfiguredGpuCountDataPoint(now, int64(*c))
	}
	nodeMB.RecordCollectorIterationCountTotalDataPoint(now, s.iterations, collectorName)

	md := nodeMB.Emit(metadata.WithResource(s.resource(nil)))
	latency.AppendToScope(md, s.resource(nil), metadata.ScopeName, s.version, now, s.hist)
	for _, m := range gpuMetrics {
		m.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	s.stale.EndGone(md, now)
	return md
}
