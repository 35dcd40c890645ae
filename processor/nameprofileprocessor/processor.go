// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// Names of the collected vocabulary the profiles read (gpu receiver, gpu_attribution).
const (
	attrJobName       = "job_name" // on every task resource of gpu_attribution, whose task_gpu_* points name the GPU
	attrNamespace     = "namespace"
	attrPodName       = "pod_name"
	attrContainerName = "container_name"
	metricTaskGPU     = "task_gpu_percent"
	metricTaskGPUMem  = "task_gpu_mem_percent" // alone on a MIG slice, which has no utilization
)

type nameProfile struct {
	profile *profile
	mb      *metadata.MetricsBuilder

	mu sync.Mutex
	// xids and nvlink are what DCGM's XID and NVLink total fields need across batches, by GPU
	// UUID.
	xids   map[string]*lastXID
	nvlink map[string]lastNVLink
}

// lastNVLink is a GPU's NVLink payload counters (rx + tx) at its previous batch.
type lastNVLink struct {
	start, at pcommon.Timestamp
	bytes     int64
}

// lastXID follows one GPU's XID counters to tell which code occurred last.
type lastXID struct {
	start  pcommon.Timestamp // of the counters, which a receiver's restart resets
	counts map[string]int64
	code   int64
}

func newNameProfile(cfg *Config, set processor.Settings) *nameProfile {
	return &nameProfile{
		profile: profileFor(cfg.Profile, cfg.DCGMVersion),
		mb:      metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		xids:    map[string]*lastXID{},
		nvlink:  map[string]lastNVLink{},
	}
}

// gpuIdentity is what the batch says about one GPU, from its device resource, its gpu_info
// series and the task_gpu_* series of the tasks that hold it.
type gpuIdentity struct {
	minor, uuid, nodeName          string
	model, pciBusID, driverVersion string
	holders                        []holder
}

// amd is whether the GPU is an AMD GPU: its gpu_info's pci_bus_id is in the kernel's form
// (0000:c1:00.0), which the gpu receiver's amdgpu backend writes, where NVML writes an 8-digit
// domain (00000000:C1:00.0).
func (id gpuIdentity) amd() bool {
	domain, _, ok := strings.Cut(id.pciBusID, ":")
	return ok && len(domain) == 4
}

type holder struct{ namespace, pod, container string }

// soleHolder is the container that holds the GPU alone. A GPU several containers share gets no
// pod labels on its device series (each holder's share is its task_gpu_percent), so sums over
// pods do not count the device twice.
func (id gpuIdentity) soleHolder() (holder, bool) {
	if len(id.holders) != 1 {
		return holder{}, false
	}
	return id.holders[0], true
}

func (p *nameProfile) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	if p.profile == nil {
		return md, nil
	}
	ids := gpuIdentities(md)
	rms := md.ResourceMetrics()
	if p.profile.nvidiaOnly {
		rms.RemoveIf(func(rm pmetric.ResourceMetrics) bool {
			res := resourceAttrs{rm.Resource().Attributes()}
			id, isGPU := ids[res.str(gpunames.KeyUUID)]
			return isGPU && res.has(gpunames.KeyMinorNumber) && !res.has(attrJobName) && id.amd()
		})
	}
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := resourceAttrs{rm.Resource().Attributes()}
		uuid := res.str(gpunames.KeyUUID)
		id, isGPU := ids[uuid]
		isGPU = isGPU && res.has(gpunames.KeyMinorNumber) && !res.has(attrJobName)
		if isGPU && rm.ScopeMetrics().Len() > 0 {
			// The gpu receiver's one scope holds the GPU's counters.
			p.recordAcrossBatches(rm.ScopeMetrics().At(0).Metrics(), uuid)
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			p.renameMetrics(rm.ScopeMetrics().At(j).Metrics(), id, isGPU)
			forEachPointAttrs(rm.ScopeMetrics().At(j).Metrics(), func(attrs pcommon.Map) { renameKeys(attrs, p.profile.gpuKeys) })
		}
		if isGPU && p.profile.labelGPU != nil {
			p.profile.labelGPU(res, id)
		} else {
			renameKeys(res.m, p.profile.gpuKeys)
		}
	}
	return md, nil
}

// gpuIdentities gathers each GPU's facts from the batch by UUID.
func gpuIdentities(md pmetric.Metrics) map[string]gpuIdentity {
	ids := map[string]gpuIdentity{}
	holders := map[string][]holder{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := resourceAttrs{rm.Resource().Attributes()}
		if res.has(attrJobName) {
			h := holder{res.str(attrNamespace), res.str(attrPodName), res.str(attrContainerName)}
			for uuid := range heldGPUs(rm) {
				holders[uuid] = append(holders[uuid], h)
			}
			continue
		}
		uuid := res.str(gpunames.KeyUUID)
		if uuid == "" || !res.has(gpunames.KeyMinorNumber) {
			continue
		}
		id := gpuIdentity{minor: res.str(gpunames.KeyMinorNumber), uuid: uuid, nodeName: res.str(gpunames.KeyNodeName)}
		if info, ok := findMetric(rm, gpunames.GPUInfo); ok {
			if pts, ok := metricpoints.Numbers(info); ok && pts.Len() > 0 {
				attrs := resourceAttrs{pts.At(0).Attributes()}
				id.model, id.pciBusID, id.driverVersion = attrs.str(gpunames.KeyModel), attrs.str(gpunames.KeyPCIBusID), attrs.str(gpunames.KeyDriverVersion)
			}
		}
		ids[uuid] = id
	}
	for uuid, hs := range holders {
		if id, ok := ids[uuid]; ok {
			id.holders = hs
			ids[uuid] = id
		}
	}
	return ids
}

// heldGPUs are the UUIDs of the GPUs a task resource has task_gpu_* points for (a task holds a
// GPU once however many of its MIG slices it holds).
func heldGPUs(rm pmetric.ResourceMetrics) map[string]bool {
	held := map[string]bool{}
	for _, name := range []string{metricTaskGPU, metricTaskGPUMem} {
		m, ok := findMetric(rm, name)
		if !ok || m.Type() != pmetric.MetricTypeGauge {
			continue
		}
		for i := 0; i < m.Gauge().DataPoints().Len(); i++ {
			if uuid, ok := m.Gauge().DataPoints().At(i).Attributes().Get(gpunames.KeyUUID); ok && uuid.Str() != "" {
				held[uuid.Str()] = true
			}
		}
	}
	return held
}

// recordAcrossBatches appends to a GPU's metrics the profile's metrics that compare a batch
// with the ones before it.
func (p *nameProfile) recordAcrossBatches(ms pmetric.MetricSlice, uuid string) {
	if p.profile.recordXID == nil && p.profile.recordNVLink == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.profile.recordXID != nil {
		p.recordLastXID(ms, uuid)
	}
	if p.profile.recordNVLink != nil {
		p.recordNVLinkBandwidth(ms, uuid)
	}
	emitted := p.mb.Emit().ResourceMetrics()
	for i := 0; i < emitted.Len(); i++ {
		for j := 0; j < emitted.At(i).ScopeMetrics().Len(); j++ {
			emitted.At(i).ScopeMetrics().At(j).Metrics().MoveAndAppendTo(ms)
		}
	}
}

// recordNVLinkBandwidth records DCGM's NVLink total (4.8's DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL,
// 4.10's DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL) from the growth of the NVLink payload counters (rx
// + tx) since the previous batch, per second; 0 on the first batch and after the counters
// restart. dcgm-exporter types it a counter though it is this rate. A GPU without NVLink has no
// counters and gets no series.
func (p *nameProfile) recordNVLinkBandwidth(ms pmetric.MetricSlice, uuid string) {
	m, ok := findIn(ms, gpunames.GPUNVLinkDataBytesTotal)
	if !ok {
		return
	}
	pts, _ := metricpoints.Numbers(m)
	if pts.Len() == 0 {
		return
	}
	now := lastNVLink{start: pts.At(0).StartTimestamp(), at: pts.At(0).Timestamp()}
	for i := 0; i < pts.Len(); i++ {
		now.bytes += pts.At(i).IntValue()
	}
	var grew int64
	var seconds float64
	if prev, ok := p.nvlink[uuid]; ok && prev.start == now.start && now.at > prev.at && now.bytes >= prev.bytes {
		grew, seconds = now.bytes-prev.bytes, float64(now.at-prev.at)/1e9
	}
	p.nvlink[uuid] = now
	p.profile.recordNVLink(p.mb, now.at, grew, seconds)
}

// recordLastXID records DCGM's XID field (4.8's DCGM_FI_DEV_XID_ERRORS, 4.10's
// DCGM_FI_DEV_XID_ERROR): the code whose counter grew last, 0 until one
// does. Codes first seen in the same batch as several others cannot be ordered: the highest
// wins.
func (p *nameProfile) recordLastXID(ms pmetric.MetricSlice, uuid string) {
	st := p.xids[uuid]
	if st == nil {
		st = &lastXID{counts: map[string]int64{}}
		p.xids[uuid] = st
	}
	var now pcommon.Timestamp
	if xids, ok := findIn(ms, gpunames.GPUXIDErrorsTotal); ok {
		var grew int64 = -1
		pts, _ := metricpoints.Numbers(xids)
		for i := 0; i < pts.Len(); i++ {
			pt := pts.At(i)
			now = pt.Timestamp()
			if pt.StartTimestamp() != st.start {
				// The receiver restarted (or this is the first batch): counting starts again.
				st.start, st.counts = pt.StartTimestamp(), map[string]int64{}
			}
			code, _ := pt.Attributes().Get(gpunames.KeyXID)
			n, prev := pt.IntValue(), st.counts[code.Str()]
			st.counts[code.Str()] = n
			if n > prev {
				if c, err := strconv.ParseInt(code.Str(), 10, 64); err == nil {
					grew = max(grew, c)
				}
			}
		}
		if grew >= 0 {
			st.code = grew
		}
	}
	if now == 0 && ms.Len() > 0 {
		now = firstTimestamp(ms.At(0))
	}
	p.profile.recordXID(p.mb, now, st.code)
}

// renameMetrics replaces each metric the profile maps by its new name(s).
func (p *nameProfile) renameMetrics(ms pmetric.MetricSlice, id gpuIdentity, isGPU bool) {
	created := map[string]pmetric.Metric{}
	renamed := map[string]bool{}
	n := ms.Len()
	for i := range n {
		src := ms.At(i)
		for j := range p.profile.metrics {
			r := &p.profile.metrics[j]
			if r.from != src.Name() {
				continue
			}
			renamed[r.from] = true
			dst, ok := created[r.to]
			if !ok {
				dst = ms.AppendEmpty()
				dst.SetName(r.to)
				dst.SetUnit(r.unit)
				dst.SetDescription(r.desc)
				switch r.kind {
				case gauge:
					dst.SetEmptyGauge()
				default:
					s := dst.SetEmptySum()
					s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
					s.SetIsMonotonic(r.kind == counter)
				}
				created[r.to] = dst
			}
			var extra []attribute
			if isGPU && p.profile.pointIdentity != nil {
				extra = p.profile.pointIdentity(id)
			}
			copyPoints(src, dst, r, extra)
		}
	}
	ms.RemoveIf(func(m pmetric.Metric) bool { return renamed[m.Name()] })
}

func copyPoints(src, dst pmetric.Metric, r *rename, extra []attribute) {
	from, ok := metricpoints.Numbers(src)
	if !ok {
		return
	}
	to, _ := metricpoints.Numbers(dst)
	for i := 0; i < from.Len(); i++ {
		pt := from.At(i)
		if r.where.key != "" {
			if v, ok := pt.Attributes().Get(r.where.key); !ok || v.Str() != r.where.value {
				continue
			}
		}
		out := to.AppendEmpty()
		pt.CopyTo(out)
		if r.scale != 0 {
			switch out.ValueType() {
			case pmetric.NumberDataPointValueTypeInt:
				out.SetIntValue(int64(float64(out.IntValue()) * r.scale))
			case pmetric.NumberDataPointValueTypeDouble:
				out.SetDoubleValue(out.DoubleValue() * r.scale)
			}
		}
		for _, k := range r.drop {
			out.Attributes().Remove(k)
		}
		renameKeys(out.Attributes(), r.keys)
		attrs := resourceAttrs{out.Attributes()}
		for _, a := range r.set {
			attrs.put(a.key, a.value)
		}
		for _, a := range extra {
			attrs.put(a.key, a.value)
		}
	}
}

// resourceAttrs reads and writes string attributes.
type resourceAttrs struct{ m pcommon.Map }

func (a resourceAttrs) has(k string) bool { _, ok := a.m.Get(k); return ok }

func (a resourceAttrs) str(k string) string {
	if v, ok := a.m.Get(k); ok {
		return v.Str()
	}
	return ""
}

// put sets a non-empty value; a fact the batch did not have stays absent rather than "".
func (a resourceAttrs) put(k, v string) {
	if v != "" {
		a.m.PutStr(k, v)
	}
}

func (a resourceAttrs) rename(from, to string) { renameKeys(a.m, map[string]string{from: to}) }

func renameKeys(m pcommon.Map, keys map[string]string) {
	for from, to := range keys {
		if v, ok := m.Get(from); ok {
			m.PutStr(to, v.Str())
			m.Remove(from)
		}
	}
}

func forEachPointAttrs(ms pmetric.MetricSlice, f func(pcommon.Map)) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		if pts, ok := metricpoints.Numbers(m); ok {
			for j := 0; j < pts.Len(); j++ {
				f(pts.At(j).Attributes())
			}
		} else if m.Type() == pmetric.MetricTypeHistogram {
			for j := 0; j < m.Histogram().DataPoints().Len(); j++ {
				f(m.Histogram().DataPoints().At(j).Attributes())
			}
		}
	}
}

func firstTimestamp(m pmetric.Metric) pcommon.Timestamp {
	if pts, ok := metricpoints.Numbers(m); ok && pts.Len() > 0 {
		return pts.At(0).Timestamp()
	}
	return 0
}

func findMetric(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		if m, ok := findIn(rm.ScopeMetrics().At(i).Metrics(), name); ok {
			return m, true
		}
	}
	return pmetric.Metric{}, false
}

func findIn(ms pmetric.MetricSlice, name string) (pmetric.Metric, bool) {
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() == name {
			return ms.At(i), true
		}
	}
	return pmetric.Metric{}, false
}
