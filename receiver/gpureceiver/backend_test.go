// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// fixedBackend is the smallest backend: GPUs that always read the same. It is README.md's
// "Backends" walk, done: a new backend is this and its reading code, and no change to the
// scraper.
type fixedBackend struct {
	gpus    []*fixedGPU
	hist    *latency.Histogram
	stopped bool
}

type fixedGPU struct {
	uuid string
	util float64
}

func (*fixedBackend) start(func(plog.Logs)) {}

func (b *fixedBackend) discover(node *metadata.MetricsBuilder, now pcommon.Timestamp) []device {
	node.RecordGpuDevicesDetectedDataPoint(now, int64(len(b.gpus)))
	devices := make([]device, len(b.gpus))
	for i, g := range b.gpus {
		devices[i] = g
	}
	return devices
}

func (b *fixedBackend) read(d device, mb *metadata.MetricsBuilder, now pcommon.Timestamp) deviceID {
	g := d.(*fixedGPU)
	mb.RecordGpuUpDataPoint(now, 1)
	mb.RecordGpuUtilizationDataPoint(now, g.util, metadata.AttributeVenderNvidia)
	for i, known := range b.gpus {
		if known == g {
			return deviceID{index: i, uuid: g.uuid}
		}
	}
	return deviceID{}
}

func (*fixedBackend) finish(*metadata.MetricsBuilder, pcommon.Timestamp) {}

func (b *fixedBackend) latency() *latency.Histogram { return b.hist }

func (b *fixedBackend) shutdown() { b.stopped = true }

// TestFixedBackend: the scraper makes the receiver's output from any backend: a resource per
// device, labeled as the backend says, the node's own resource and the latency histogram.
func TestFixedBackend(t *testing.T) {
	clk := newFakeClock()
	b := &fixedBackend{
		gpus: []*fixedGPU{{uuid: "GPU-a", util: 40}, {uuid: "GPU-b", util: 90}},
		hist: latency.New("cmd_fixed_latency_seconds", "Latency of nothing.", clk.Now()),
	}
	s := newScraper(settingsFor(testConfig(), clk), b)
	b.start(nil)
	for iteration := int64(1); iteration <= 2; iteration++ {
		md := s.scrape()
		require.Equal(t, 3, md.ResourceMetrics().Len(), "the node and two GPUs")
		node := nodeResource(t, md)
		assert.Equal(t, int64(2), value(t, node, "gpu_devices_detected"))
		assert.Equal(t, iteration, value(t, node, "collector_iteration_count_total"))
		assert.Contains(t, metricNames(node), "cmd_fixed_latency_seconds", "the backend's histogram")
		for minor, want := range map[string]struct {
			uuid string
			util float64
		}{"0": {"GPU-a", 40}, "1": {"GPU-b", 90}} {
			rm := gpuResource(t, md, minor)
			uuid, _ := rm.Resource().Attributes().Get("uuid")
			assert.Equal(t, want.uuid, uuid.Str())
			require.Len(t, points(rm, "gpu_utilization"), 1)
			assert.InDelta(t, want.util, points(rm, "gpu_utilization")[0].DoubleValue(), 0)
			assert.Equal(t, int64(1), value(t, rm, "gpu_up"))
		}
	}
	s.backend.shutdown()
	assert.True(t, b.stopped)
}

func metricNames(rm pmetric.ResourceMetrics) []string {
	var names []string
	for i := range rm.ScopeMetrics().Len() {
		for j := range rm.ScopeMetrics().At(i).Metrics().Len() {
			names = append(names, rm.ScopeMetrics().At(i).Metrics().At(j).Name())
		}
	}
	return names
}
