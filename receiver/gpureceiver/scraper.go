// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// collectorName is the name label of collector_iteration_count_total.
const collectorName = "gpu"

// scraperSettings is what the scraper and its backend are made from.
type scraperSettings struct {
	cfg      *Config
	set      receiver.Settings
	nodeName string
	// clock times everything: timestamps, the calls' deadlines, the backends' retries and
	// pauses.
	clock clock.Clock
}

func (ss scraperSettings) newMB() *metadata.MetricsBuilder {
	return metadata.NewMetricsBuilder(ss.cfg.MetricsBuilderConfig, ss.set)
}

// gpuScraper turns a backend's readings into the receiver's metrics: one resource for the node and
// one for each device, each with its own MetricsBuilder, the backend's latency histogram, and
// the end of the series a collection no longer has. Touched only by the scrape (scrapes never
// overlap).
type gpuScraper struct {
	ss      scraperSettings
	backend backend
	node    *metadata.MetricsBuilder
	// mbs are the MetricsBuilders of the devices the last collection discovered.
	mbs        map[device]*metadata.MetricsBuilder
	iterations int64
	// stale ends the series a collection no longer has: a process that left the GPU, a health
	// condition that cleared, a reading a lost GPU no longer gives.
	stale *staleness.Tracker
	// check runs otelcol-gpu-check now and then; nil without node_check.
	check *nodeChecker
}

func newScraper(ss scraperSettings, b backend) *gpuScraper {
	return &gpuScraper{ss: ss, backend: b, node: ss.newMB(), mbs: map[device]*metadata.MetricsBuilder{}, stale: staleness.NewTracker()}
}

// resource is the node's resource, or a device's when id is set.
func (ss scraperSettings) resource(id *deviceID) pcommon.Resource {
	rb := metadata.NewResourceBuilder(ss.cfg.ResourceAttributes)
	rb.SetNodeName(ss.nodeName)
	if ss.cfg.Backend == BackendSimulated {
		rb.SetSimulated("true")
	}
	if id != nil {
		rb.SetMinorNumber(strconv.Itoa(id.index))
		rb.SetUUID(id.uuid)
	}
	return rb.Emit()
}

// scrape reads every device in parallel; a device that hangs or is lost costs at most one
// call_timeout and never holds back the others.
func (s *gpuScraper) scrape() pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(s.ss.clock.Now())
	s.iterations++
	devices := s.backend.discover(s.node, now)
	mbs := make([]*metadata.MetricsBuilder, len(devices))
	known := make(map[device]*metadata.MetricsBuilder, len(devices))
	for i, d := range devices {
		if mbs[i] = s.mbs[d]; mbs[i] == nil {
			mbs[i] = s.ss.newMB()
		}
		known[d] = mbs[i]
	}
	s.mbs = known
	ids := make([]deviceID, len(devices))
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() { ids[i] = s.backend.read(d, mbs[i], now) })
	}
	wg.Wait()
	s.backend.finish(s.node, now)
	if c := s.ss.cfg.ConfiguredGPUCount; c != nil {
		s.node.RecordConfiguredGpuCountDataPoint(now, int64(*c))
	}
	if s.check != nil {
		s.check.emit(s.node, now)
	}
	s.node.RecordCollectorIterationCountTotalDataPoint(now, s.iterations, collectorName)

	md := s.node.Emit(metadata.WithResource(s.ss.resource(nil)))
	latency.AppendToScope(md, s.ss.resource(nil), metadata.ScopeName, s.ss.set.BuildInfo.Version, now, s.backend.latency())
	for i, mb := range mbs {
		mb.Emit(metadata.WithResource(s.ss.resource(&ids[i]))).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	s.stale.EndGone(md, now)
	return md
}
