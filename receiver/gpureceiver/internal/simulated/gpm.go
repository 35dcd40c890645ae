// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU Performance Monitoring (GPM), Hopper and newer: go-nvml's mocks implement none of it, and
// the library's own GpmMetricsGet takes only its own sample type, so the simulation answers the
// calls itself. A sample holds what NVML's holds, a snapshot of counters: here the target's busy
// time integrated up to the sample's time. Two samples give the activity averaged over the time
// between them, as NVML computes its metrics from two snapshots.

// gpmTarget is what a GPM sample reads: a GPU, or one of its MIG instances.
type gpmTarget struct {
	gpu      *Device
	instance bool
	// load is the percent of time the target is busy at a scenario time; busy integrates it
	// over the samples taken so far.
	load func(time.Duration) float64
	busy integral
}

// gpmSample is a sample buffer of the simulation. It counts a call made on it once it was freed:
// on real NVML that would be a use after free.
type gpmSample struct {
	srv *Server

	mu     sync.Mutex
	freed  bool
	target *gpmTarget // nil until a sample was read into it
	at     time.Duration
	busy   float64
}

var _ nvml.GpmSample = (*gpmSample)(nil)

// GpmSampleAlloc allocates a sample buffer.
func (s *Server) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	s.gpmLive.Add(1)
	return &gpmSample{srv: s}, nvml.SUCCESS
}

// GPMSamplesLive is how many sample buffers are allocated and not freed.
func (s *Server) GPMSamplesLive() int64 { return s.gpmLive.Load() }

// GPMSamplesMisused is how many calls were made on a sample buffer after it was freed, frees of
// a freed one included.
func (s *Server) GPMSamplesMisused() int64 { return s.gpmMisused.Load() }

// Free releases the buffer; a second free is a misuse.
func (g *gpmSample) Free() nvml.Return {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		g.srv.gpmMisused.Add(1)
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g.freed = true
	g.srv.gpmLive.Add(-1)
	return nvml.SUCCESS
}

// Get reads a sample of the GPU, as nvmlGpmSampleGet.
func (g *gpmSample) Get(device nvml.Device) nvml.Return {
	return device.GpmSampleGet(g)
}

// MigGet reads a sample of one of the GPU's MIG instances, as nvmlGpmMigSampleGet.
func (g *gpmSample) MigGet(device nvml.Device, gpuInstanceID int) nvml.Return {
	return device.GpmMigSampleGet(gpuInstanceID, g)
}

// take reads a sample of target at scenario time t into g.
func (s *Server) take(sample nvml.GpmSample, target *gpmTarget, t time.Duration) nvml.Return {
	g, ok := sample.(*gpmSample)
	if !ok || g.srv != s {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		s.gpmMisused.Add(1)
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g.target, g.at, g.busy = target, t, target.busy.upTo(t, target.load)
	return nvml.SUCCESS
}

// GpmQueryDeviceSupport: the Hopper and Blackwell profiles have GPM, the A100 has not.
func (d *Device) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	_, ret := d.check()
	support := nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION}
	if d.profile.gpm {
		support.IsSupportedDevice = 1
	}
	return support, ret
}

// GpmSampleGet reads a sample of the whole GPU.
func (d *Device) GpmSampleGet(sample nvml.GpmSample) nvml.Return {
	t, ret := d.check()
	if ret != nvml.SUCCESS {
		return ret
	}
	if !d.profile.gpm {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return d.srv.take(sample, &d.gpm, t)
}

// GpmMigSampleGet reads a sample of the MIG instance with GPU instance id gi.
func (d *Device) GpmMigSampleGet(gi int, sample nvml.GpmSample) nvml.Return {
	t, ret := d.check()
	if ret != nvml.SUCCESS {
		return ret
	}
	if !d.profile.gpm {
		return nvml.ERROR_NOT_SUPPORTED
	}
	for _, m := range d.migs {
		if m.gi == gi {
			return d.srv.take(sample, &m.gpm, t)
		}
	}
	return nvml.ERROR_NOT_FOUND
}

// GpmMetricsGet computes the metrics asked for from two samples of one target, the second
// later: the target's mean load between them, split by its GPU's activity. The interconnects'
// traffic is the GPU's; an instance answers NOT_SUPPORTED for it, and so does a GPU without
// NVLink for NVLink's, each in the metric's own return.
func (s *Server) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	first, ok1 := m.Sample1.(*gpmSample)
	second, ok2 := m.Sample2.(*gpmSample)
	if !ok1 || !ok2 || first == second || first.srv != s || second.srv != s {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	target, load, ret := between(first, second)
	if ret != nvml.SUCCESS {
		return ret
	}
	for i := range min(int(m.NumMetrics), len(m.Metrics)) {
		v, ret := target.metric(nvml.GpmMetricId(m.Metrics[i].MetricId), load)
		m.Metrics[i].Value, m.Metrics[i].NvmlReturn = v, uint32(ret)
	}
	return nvml.SUCCESS
}

// between is the two samples' target and its mean load, in percent, from the first to the
// second.
func between(first, second *gpmSample) (*gpmTarget, float64, nvml.Return) {
	target, from, busyFrom, ok1 := first.read()
	other, to, busyTo, ok2 := second.read()
	// Two samples of one target, apart in time, as NVML needs them.
	if !ok1 || !ok2 || target == nil || target != other || to <= from {
		return nil, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return target, (busyTo - busyFrom) / (to - from).Seconds(), nvml.SUCCESS
}

// read is what the sample holds; false once it was freed (a misuse, counted).
func (g *gpmSample) read() (target *gpmTarget, at time.Duration, busy float64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		g.srv.gpmMisused.Add(1)
		return nil, 0, 0, false
	}
	return g.target, g.at, g.busy, true
}

// mib is a MiB per second, GPM's unit of traffic.
const mib = 1 << 20

// metric is one GPM metric of a target busy load percent of the time.
func (t *gpmTarget) metric(id nvml.GpmMetricId, load float64) (float64, nvml.Return) {
	a := t.gpu.activity
	sm := load * a.SM
	switch id {
	case nvml.GPM_METRIC_GRAPHICS_UTIL:
		return load, nvml.SUCCESS
	case nvml.GPM_METRIC_SM_UTIL:
		return sm, nvml.SUCCESS
	case nvml.GPM_METRIC_SM_OCCUPANCY:
		return sm * a.Occupancy, nvml.SUCCESS
	case nvml.GPM_METRIC_ANY_TENSOR_UTIL:
		return sm * min(1, a.HMMA+a.IMMA+a.DFMA), nvml.SUCCESS
	case nvml.GPM_METRIC_HMMA_TENSOR_UTIL:
		return sm * a.HMMA, nvml.SUCCESS
	case nvml.GPM_METRIC_IMMA_TENSOR_UTIL:
		return sm * a.IMMA, nvml.SUCCESS
	case nvml.GPM_METRIC_DFMA_TENSOR_UTIL:
		return sm * a.DFMA, nvml.SUCCESS
	case nvml.GPM_METRIC_FP64_UTIL:
		return sm * a.FP64, nvml.SUCCESS
	case nvml.GPM_METRIC_FP32_UTIL:
		return sm * a.FP32, nvml.SUCCESS
	case nvml.GPM_METRIC_FP16_UTIL:
		return sm * a.FP16, nvml.SUCCESS
	case nvml.GPM_METRIC_DRAM_BW_UTIL:
		return load * a.DRAM, nvml.SUCCESS
	case nvml.GPM_METRIC_PCIE_RX_PER_SEC, nvml.GPM_METRIC_PCIE_TX_PER_SEC:
		if t.instance {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		counter := nvml.PCIE_UTIL_RX_BYTES
		if id == nvml.GPM_METRIC_PCIE_TX_PER_SEC {
			counter = nvml.PCIE_UTIL_TX_BYTES
		}
		return pcieKBPerSecond(load, counter) * 1024 / mib, nvml.SUCCESS
	case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
		if t.instance || t.gpu.profile.nvLinks == 0 {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return load / 100 * nvlinkKiBPerSecond * 1024 / mib, nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}
