// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// GPU Performance Monitoring (GPM, Hopper and newer) measures what the GPU's busy time was
// made of (SM activity and occupancy, the tensor and floating-point pipes, DRAM bandwidth,
// PCIe and NVLink traffic) between two samples of its counters. Each GPU, and each of its MIG
// instances, keeps two sample buffers from one collection to the next: a collection reads one
// sample and computes the metrics from it and the previous collection's, so they cover the whole
// interval and no collection waits for a second sample.

// mib is GPM's unit of traffic, a MiB per second.
const mib = 1 << 20

type recordGPM func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64, instance ...metadata.MetricAttributeOption)

func pipe(p metadata.AttributePipe) recordGPM {
	return func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64, instance ...metadata.MetricAttributeOption) {
		mb.RecordGpuPipeActivePercentDataPoint(ts, v, p, instance...)
	}
}

func traffic(record func(*metadata.MetricsBuilder, pcommon.Timestamp, float64, metadata.AttributeDirection), dir metadata.AttributeDirection) recordGPM {
	return func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64, _ ...metadata.MetricAttributeOption) {
		record(mb, ts, v*mib, dir)
	}
}

// gpmMetric is a GPM metric and what records it.
type gpmMetric struct {
	id     nvml.GpmMetricId
	record recordGPM
}

// gpmActivity is what a GPU's and each MIG instance's busy time was made of; gpmTraffic the
// interconnects', which are the whole GPU's.
var (
	gpmActivity = []gpmMetric{
		{nvml.GPM_METRIC_GRAPHICS_UTIL, (*metadata.MetricsBuilder).RecordGpuGraphicsEngineActivePercentDataPoint},
		{nvml.GPM_METRIC_SM_UTIL, (*metadata.MetricsBuilder).RecordGpuSmActivePercentDataPoint},
		{nvml.GPM_METRIC_SM_OCCUPANCY, (*metadata.MetricsBuilder).RecordGpuSmOccupancyPercentDataPoint},
		{nvml.GPM_METRIC_ANY_TENSOR_UTIL, pipe(metadata.AttributePipeTensor)},
		{nvml.GPM_METRIC_DFMA_TENSOR_UTIL, pipe(metadata.AttributePipeTensorDfma)},
		{nvml.GPM_METRIC_HMMA_TENSOR_UTIL, pipe(metadata.AttributePipeTensorHmma)},
		{nvml.GPM_METRIC_IMMA_TENSOR_UTIL, pipe(metadata.AttributePipeTensorImma)},
		{nvml.GPM_METRIC_FP64_UTIL, pipe(metadata.AttributePipeFp64)},
		{nvml.GPM_METRIC_FP32_UTIL, pipe(metadata.AttributePipeFp32)},
		{nvml.GPM_METRIC_FP16_UTIL, pipe(metadata.AttributePipeFp16)},
		{nvml.GPM_METRIC_DRAM_BW_UTIL, (*metadata.MetricsBuilder).RecordGpuDramActivePercentDataPoint},
	}
	gpmTraffic = []gpmMetric{
		{nvml.GPM_METRIC_PCIE_RX_PER_SEC, traffic((*metadata.MetricsBuilder).RecordGpuPcieAverageBytesPerSecondDataPoint, metadata.AttributeDirectionRx)},
		{nvml.GPM_METRIC_PCIE_TX_PER_SEC, traffic((*metadata.MetricsBuilder).RecordGpuPcieAverageBytesPerSecondDataPoint, metadata.AttributeDirectionTx)},
		{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, traffic((*metadata.MetricsBuilder).RecordGpuNvlinkAverageBytesPerSecondDataPoint, metadata.AttributeDirectionRx)},
		{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, traffic((*metadata.MetricsBuilder).RecordGpuNvlinkAverageBytesPerSecondDataPoint, metadata.AttributeDirectionTx)},
	}
	gpmDevice = slices.Concat(gpmActivity, gpmTraffic)
)

// gpmSample is an NVML sample buffer and who holds it: the GPU's collection state while it keeps
// it, and each call that uses it for as long as the call runs. A call past its deadline goes on
// in its goroutine (a cgo call cannot be cancelled) and still writes into the buffer, so the
// buffer is freed by whoever lets go last: the collection that drops it (the GPU was lost, the
// receiver stops), or the late call when it returns after that. Each buffer also holds the
// library, so NVML is not shut down before the buffer is freed.
type gpmSample struct {
	nvml.GpmSample
	lib   *nvmlLibrary
	holds atomic.Int32
}

func (g *gpmSample) hold() { g.holds.Add(1) }

func (g *gpmSample) letGo() {
	if g.holds.Add(-1) == 0 {
		g.lib.freeSample(g.GpmSample)
	}
}

// handoff settles who lets go of what a call holds when the call may outlive the collection's
// wait: the call or the collection, whichever claims it first.
type handoff struct{ claimed atomic.Bool }

func (h *handoff) claim() bool { return h.claimed.CompareAndSwap(false, true) }

// gpmPair is the two sample buffers of a GPU or of one of its MIG instances, nil until
// allocated; last is the one holding the previous collection's sample, -1 when there is none.
type gpmPair struct {
	samples [2]*gpmSample
	last    int
}

func newGPMPair() *gpmPair { return &gpmPair{last: -1} }

// release lets go of the buffers: they are freed now, or by the last call using them.
func (p *gpmPair) release() {
	for i, smp := range p.samples {
		if smp != nil {
			smp.letGo()
			p.samples[i] = nil
		}
	}
	p.last = -1
}

// gpmState is a GPU's GPM state: whether it has GPM (asked once per handle), and the sample
// buffers of the GPU and of its MIG instances, by GPU instance id. Touched only by the
// collection, under enumMu.
type gpmState struct {
	asked, supported bool
	device           *gpmPair
	instances        map[int]*gpmPair
	// metrics is what GpmMetricsGet fills, kept for the next call (it is some 20 KB): dropped
	// when a call on it passed its deadline, as that call still writes into it.
	metrics *nvml.GpmMetricsGetType
}

// release lets go of every buffer and forgets the GPU's support: for a GPU lost, gone or
// replaced by another handle, and at shutdown.
func (st *gpmState) release() {
	if st.device != nil {
		st.device.release()
	}
	for _, p := range st.instances {
		p.release()
	}
	*st = gpmState{}
}

// forgetPrevious drops the previous samples after a collection that went down: the next one
// starts a new interval instead of reporting one that spans the outage.
func (st *gpmState) forgetPrevious() {
	if st.device != nil {
		st.device.last = -1
	}
	for _, p := range st.instances {
		p.last = -1
	}
}

// readGPM samples the GPU and each of its MIG instances, and reports the metrics of the interval
// since the previous collection's samples.
func readGPM(r *gpuRead) {
	if !r.s.lib.has(symGPM) {
		return
	}
	st := &r.gpu.gpm
	if !st.asked {
		// ret is read only when the call returned in time: a late one still writes it.
		var ret nvml.Return
		support, ok := read(r, "GpmQueryDeviceSupport", func() (nvml.GpmSupport, nvml.Return) {
			v, rt := r.dev.GpmQueryDeviceSupport()
			ret = rt
			return v, rt
		})
		if !ok {
			// A GPU that says NOT_SUPPORTED is not asked again; another error is, next time.
			if r.down == nvml.SUCCESS && ret == nvml.ERROR_NOT_SUPPORTED {
				st.asked = true
			}
			return
		}
		st.asked, st.supported = true, support.IsSupportedDevice != 0
		st.device, st.instances = newGPMPair(), map[int]*gpmPair{}
	}
	if !st.supported {
		return
	}
	sampleGPM(r, st.device, "GpmSampleGet", r.dev.GpmSampleGet, gpmDevice)
	if !r.s.lib.has(symGPMMig) || !r.instancesKnown {
		return
	}
	for gi, p := range st.instances {
		if !slices.Contains(r.instances, gi) {
			p.release()
			delete(st.instances, gi)
		}
	}
	for _, gi := range r.instances {
		p := st.instances[gi]
		if p == nil {
			p = newGPMPair()
			st.instances[gi] = p
		}
		get := func(smp nvml.GpmSample) nvml.Return { return r.dev.GpmMigSampleGet(gi, smp) }
		sampleGPM(r, p, "GpmMigSampleGet", get, gpmActivity, metadata.WithGpmGpuInstanceIDMetricAttribute(strconv.Itoa(gi)))
	}
}

// sampleGPM reads a sample into the pair's buffer that is not the previous one and, when there
// is a previous one, records the metrics between the two.
func sampleGPM(r *gpuRead, p *gpmPair, call string, get func(nvml.GpmSample) nvml.Return, metrics []gpmMetric, instance ...metadata.MetricAttributeOption) {
	cur := 0
	if p.last == 0 {
		cur = 1
	}
	if p.samples[cur] == nil {
		if p.samples[cur] = allocSample(r); p.samples[cur] == nil {
			p.last = -1
			return
		}
	}
	smp := p.samples[cur]
	if !gpmCall(r, call, func() nvml.Return { return get(smp.GpmSample) }, smp) {
		p.last = -1
		return
	}
	if p.last >= 0 {
		prev := p.samples[p.last]
		st := &r.gpu.gpm
		if st.metrics == nil {
			st.metrics = &nvml.GpmMetricsGetType{}
		}
		m := st.metrics
		m.NumMetrics, m.Sample1, m.Sample2 = uint32(len(metrics)), prev.GpmSample, smp.GpmSample
		for i, g := range metrics {
			m.Metrics[i] = nvml.GpmMetric{MetricId: uint32(g.id)}
		}
		ok := gpmCall(r, "GpmMetricsGet", func() nvml.Return { return r.s.lib.GpmMetricsGet(m) }, prev, smp)
		if r.down == errDeadline {
			st.metrics = nil // a late call still writes into it
		} else {
			m.Sample1, m.Sample2 = nil, nil // no handle kept past the call
		}
		if ok {
			for i, g := range metrics {
				// A metric the GPU or instance lacks answers in its own return, and is left out.
				if v := m.Metrics[i]; nvml.Return(v.NvmlReturn) == nvml.SUCCESS {
					g.record(r.mb, r.now, v.Value, instance...)
				}
			}
		}
	}
	p.last = cur
}

// gpmCall makes a GPM call through read, holding the buffers it uses for as long as it runs. A
// call that starts claims the handoff and lets go of them when it returns, however late; one
// refused or given up before it started leaves the handoff to the collection, which lets go of
// them, and is then never made.
func gpmCall(r *gpuRead, call string, f func() nvml.Return, uses ...*gpmSample) bool {
	for _, smp := range uses {
		smp.hold()
	}
	letGo := func() {
		for _, smp := range uses {
			smp.letGo()
		}
	}
	var h handoff
	_, ok := read(r, call, func() (struct{}, nvml.Return) {
		if !h.claim() {
			return struct{}{}, errDeadline
		}
		defer letGo()
		return struct{}{}, f()
	})
	if h.claim() {
		letGo()
	}
	return ok
}

// allocSample allocates a sample buffer on the GPU's lane, held by the collection; nil when the
// allocation failed or is late. The library is held from before the call, so that a late
// allocation returning after shutdown still finds NVML up to free the buffer it got. Two
// handoffs settle who lets go: started, of a call never made; done, of a late call's result.
func allocSample(r *gpuRead) *gpmSample {
	var started, done handoff
	var got nvml.GpmSample
	var gotRet nvml.Return
	r.s.lib.hold() // the buffer's hold on the library, passed on to it once allocated
	read(r, "GpmSampleAlloc", func() (struct{}, nvml.Return) {
		if !started.claim() {
			return struct{}{}, errDeadline
		}
		smp, ret := r.s.lib.GpmSampleAlloc()
		if !done.claim() { // the collection gave up on it
			if ret == nvml.SUCCESS {
				r.s.lib.freeSample(smp)
			} else {
				r.s.lib.letGo()
			}
			return struct{}{}, ret
		}
		got, gotRet = smp, ret
		return struct{}{}, ret
	})
	switch {
	case started.claim(): // never made
		r.s.lib.letGo()
		return nil
	case done.claim(): // late: the call lets go of what it gets
		return nil
	case gotRet != nvml.SUCCESS:
		r.s.lib.letGo()
		return nil
	}
	smp := &gpmSample{GpmSample: got, lib: r.s.lib}
	smp.holds.Store(1)
	return smp
}
