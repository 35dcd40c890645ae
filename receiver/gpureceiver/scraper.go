// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"strconv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// collectorName is the name label of collector_iteration_count_total.
const collectorName = "gpu"

// sourceSettings is what a source needs besides the library; now is the clock, a seam for tests.
type sourceSettings struct {
	cfg      *Config
	set      receiver.Settings
	nodeName string
	now      func() time.Time
	// emitLogs receives the XID log records; nil without a logs pipeline.
	emitLogs func(plog.Logs)
}

// scrapeState is the node-level part of the collection, touched only by the scrape.
type scrapeState struct {
	nodeMB     *metadata.MetricsBuilder
	iterations int64
	// stale ends the series a collection no longer has: a process that left the GPU, a health
	// condition that cleared, a reading a lost GPU no longer gives.
	stale *staleness.Tracker
}

// gpuSource is an nvmlSource with the scrape on top.
type gpuSource struct {
	*nvmlSource
	scrapeState
	nodeName string
	now      func() time.Time
	// version is the collector's, set on the scope the histogram gets when no gauge is enabled.
	version string
}

func newSource(ss sourceSettings, lib nvml.Interface, release func()) *gpuSource {
	cfg := ss.cfg
	g := &gpuSource{nodeName: ss.nodeName, now: ss.now, version: ss.set.BuildInfo.Version}
	hist := latency.New("cmd_nvml_latency_seconds", "Latency of NVML calls, hung ones included once they return.", ss.now())
	g.nvmlSource = &nvmlSource{
		lib:     lib,
		cfg:     cfg,
		logger:  ss.set.Logger,
		hist:    hist,
		guard:   deadline.Guard{Timeout: cfg.CallTimeout, Observe: hist.Observe},
		newMB:   func() *metadata.MetricsBuilder { return metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, ss.set) },
		release: release,
		stop:    make(chan struct{}),
		xids: &xidTracker{
			table:        newXIDTable(cfg.XID.Table),
			dedupWindow:  cfg.XID.DedupWindow,
			healthWindow: cfg.XID.HealthWindow,
			now:          ss.now,
			logger:       ss.set.Logger,
			resource:     g.resource,
			emit:         ss.emitLogs,
			lb:           metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: cfg.Events, ResourceAttributes: cfg.ResourceAttributes}, ss.set),
			counts:       map[string]map[uint64]int64{},
			health:       map[string][]healthMark{},
		},
	}
	g.nodeMB = g.newMB()
	g.stale = staleness.NewTracker()
	return g
}

// resource is the node's resource, or a GPU's when id is set.
func (g *gpuSource) resource(id *gpuIdentity) pcommon.Resource {
	rb := metadata.NewResourceBuilder(g.cfg.ResourceAttributes)
	rb.SetNodeName(g.nodeName)
	if g.cfg.Backend == backendSimulated {
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
func (g *gpuSource) scrape() pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(g.now())
	g.iterations++
	nodeMB := g.nodeMB
	var gpuMetrics []pmetric.Metrics
	if g.ready.Load() {
		nodeMB.RecordGpuNvmlUpDataPoint(now, 1)
		g.enumMu.Lock()
		if ret := g.enumerate(); ret == nvml.SUCCESS {
			nodeMB.RecordGpuDevicesDetectedDataPoint(now, int64(len(g.gpus)))
		} else {
			// Without a device count the known GPUs are reported down, with their labels.
			for _, st := range g.gpus {
				st.handleErr = ret
			}
		}
		var wg sync.WaitGroup
		for _, st := range g.gpus {
			wg.Go(func() { g.collectGPU(st, now) })
		}
		wg.Wait()
		for _, st := range g.gpus {
			gpuMetrics = append(gpuMetrics, st.mb.Emit(metadata.WithResource(g.resource(st.id))))
		}
		g.enumMu.Unlock()
	} else {
		nodeMB.RecordGpuNvmlUpDataPoint(now, 0)
	}
	if c := g.cfg.ConfiguredGPUCount; c != nil {
		nodeMB.RecordConfiguredGpuCountDataPoint(now, int64(*c))
	}
	nodeMB.RecordCollectorIterationCountTotalDataPoint(now, g.iterations, collectorName)

	md := nodeMB.Emit(metadata.WithResource(g.resource(nil)))
	latency.AppendToScope(md, g.resource(nil), metadata.ScopeName, g.version, now, g.hist)
	for _, m := range gpuMetrics {
		m.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	g.stale.EndGone(md, now)
	return md
}
