// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// amdBackend reads AMD GPUs from the amdgpu driver's and the KFD's files. Each collection
// lists the devices (GPUs, or the compute partitions of a partitioned GPU) and the processes'
// VRAM, then reads every physical GPU's files once, in parallel, each GPU's under call_timeout
// on its own lane: a read that hangs (a wedged driver) takes only its GPU down, and the GPU is
// skipped until the read returns. The devices of one GPU (its partitions) share its read.
type amdBackend struct {
	cfg    *Config
	logger *zap.Logger
	reader amdgpu.Reader
	// readGPU reads a GPU's device directory: amdgpu.ReadGPU, or a test's stand-in.
	readGPU func(dir string) amdgpu.Snapshot
	guard   deadline.Guard
	hist    *latency.Histogram
	// listLane carries the listing of devices and process files.
	listLane deadline.Lane
	driver   string

	// mu guards errors and unjoined, which the parallel reads count into.
	mu sync.Mutex
	// errors counts the files that could not be read, by source.
	errors map[metadata.AttributeReadSource]int64
	// unjoined are the KFD nodes already logged as joining no GPU, by properties file: counted
	// at each collection, logged once.
	unjoined map[string]bool

	// The listing, touched only by discover: devices are every device seen, in minor number
	// order (a device that vanished keeps its place and labels and reports gpu_up 0); gpus the
	// physical GPUs' reading state, by PCI address; vram the processes' VRAM of this collection.
	devices []*amdDevice
	gpus    map[string]*amdGPU
	vram    map[uint32]map[int]uint64
}

// amdDevice is a resource: a whole GPU or a compute partition.
type amdDevice struct {
	dev   amdgpu.Device
	index int
	uuid  string
	model string
	// present is whether the last listing had it.
	present bool
	// gpu is its physical GPU, nil while not present.
	gpu *amdGPU
}

// amdGPU is a physical GPU's reading state.
type amdGPU struct {
	lane deadline.Lane
	dir  string
	// residency is the last gpu_metrics v1_6+ throttler residency, to tell which limiter grew.
	residency *amdgpu.ThrottleResidency
	// read is this collection's read of the GPU's files, made once by the first of its devices.
	read func() amdRead
}

// amdRead is one physical GPU's reading of a collection.
type amdRead struct {
	snap amdgpu.Snapshot
	ok   bool
}

func newAMDBackend(ss scraperSettings) *amdBackend {
	cfg := ss.cfg
	hist := latency.New("cmd_rocm_smi_latency_seconds", "Latency of reading each AMD GPU's sysfs files (and of listing the GPUs), hung reads included once they return.", ss.clock.Now())
	s := &amdBackend{
		cfg:      cfg,
		logger:   ss.set.Logger,
		reader:   amdgpu.Reader{Root: cfg.RootPath},
		readGPU:  amdgpu.ReadGPU,
		guard:    deadline.Guard{Timeout: cfg.CallTimeout, Observe: hist.Observe, Clock: ss.clock},
		hist:     hist,
		errors:   map[metadata.AttributeReadSource]int64{},
		unjoined: map[string]bool{},
		gpus:     map[string]*amdGPU{},
	}
	s.driver = s.reader.DriverVersion()
	return s
}

// start has nothing to start: AMD GPUs have no XIDs, the logs pipeline gets nothing.
func (*amdBackend) start(func(plog.Logs)) {}

func (s *amdBackend) latency() *latency.Histogram { return s.hist }

func (*amdBackend) shutdown() {}

// countErrors counts errs by source, and logs them: a KFD node that joins no GPU (whose
// partition and its processes' VRAM are then missing) once as a warning, the others at debug
// level.
func (s *amdBackend) countErrors(errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range errs {
		source := metadata.AttributeReadSourceSysfs
		re, isRead := errors.AsType[amdgpu.ReadError](err)
		if isRead {
			if src, ok := metadata.MapAttributeReadSource[re.Source]; ok {
				source = src
			}
		}
		s.errors[source]++
		if _, unjoined := errors.AsType[amdgpu.UnjoinedKFDNodeError](err); unjoined {
			if !s.unjoined[re.Path] {
				s.unjoined[re.Path] = true
				s.logger.Warn("A KFD node belongs to no AMD GPU the driver lists: its device and its processes' VRAM are left out, and it is counted in collector_read_errors_total{source=\"kfd\"} at each collection", zap.Error(err))
			}
			continue
		}
		s.logger.Debug("An AMD GPU file could not be read; its reading is left out", zap.Error(err))
	}
}

type amdListing struct {
	devices []amdgpu.Device
	vram    map[uint32]map[int]uint64
	errs    []error
}

func (s *amdBackend) discover(node *metadata.MetricsBuilder, now pcommon.Timestamp) []device {
	listing, err := deadline.Call(&s.guard, &s.listLane, func() (amdListing, error) {
		var l amdListing
		var errs []error
		l.devices, l.errs = s.reader.Devices()
		l.vram, errs = s.reader.ProcessVRAM()
		l.errs = append(l.errs, errs...)
		return l, nil
	})
	listed := err == nil
	if listed {
		s.countErrors(listing.errs)
		s.merge(listing.devices)
		node.RecordGpuDevicesDetectedDataPoint(now, int64(len(listing.devices)))
	} else {
		s.countError(metadata.AttributeReadSourceDeadline)
		s.logger.Warn("Listing the AMD GPUs passed call_timeout: every GPU is reported down until it returns", zap.Duration("call_timeout", s.cfg.CallTimeout))
	}
	s.vram = listing.vram
	s.planReads(listed)
	devices := make([]device, len(s.devices))
	for i, d := range s.devices {
		d.index = i
		devices[i] = d
	}
	return devices
}

// finish records the files that could not be read, by source, since the receiver started.
func (s *amdBackend) finish(node *metadata.MetricsBuilder, now pcommon.Timestamp) {
	for source, n := range s.errors {
		node.RecordCollectorReadErrorsTotalDataPoint(now, n, collectorName, source)
	}
}

func (s *amdBackend) countError(source metadata.AttributeReadSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[source]++
}

// merge takes a listing: known devices are updated, new ones added in PCI and partition order,
// those missing kept as not present.
func (s *amdBackend) merge(listed []amdgpu.Device) {
	key := func(d amdgpu.Device) string { return d.PCIAddress + "/" + strconv.Itoa(d.Partition) }
	byKey := map[string]*amdDevice{}
	for _, d := range s.devices {
		byKey[key(d.dev)] = d
		d.present = false
	}
	added := false
	for _, dev := range listed {
		d, ok := byKey[key(dev)]
		if !ok {
			d = &amdDevice{}
			s.devices = append(s.devices, d)
			added = true
		}
		d.dev, d.present = dev, true
		if id := dev.KFDUniqueID; id != 0 || d.uuid == "" {
			d.uuid = deviceUUID(dev, id)
		}
	}
	if added {
		slices.SortStableFunc(s.devices, func(a, b *amdDevice) int {
			return cmp.Or(cmp.Compare(a.dev.PCIAddress, b.dev.PCIAddress), cmp.Compare(a.dev.Partition, b.dev.Partition))
		})
	}
}

// deviceUUID is GPU- and the unique_id in 16 hex digits (what rocminfo prints and
// ROCR_VISIBLE_DEVICES takes), with -<partition> for a compute partition; "" without one.
func deviceUUID(dev amdgpu.Device, uniqueID uint64) string {
	if uniqueID == 0 {
		return ""
	}
	uuid := fmt.Sprintf("GPU-%016x", uniqueID)
	if dev.Partitions > 1 {
		uuid += "-" + strconv.Itoa(dev.Partition)
	}
	return uuid
}

// planReads sets this collection's read of each present physical GPU, made once, by the first
// of its devices, under call_timeout on the GPU's lane; nothing is read when the listing failed.
func (s *amdBackend) planReads(listed bool) {
	for _, g := range s.gpus {
		g.read = nil
	}
	for _, d := range s.devices {
		d.gpu = nil
		if !listed || !d.present {
			continue
		}
		pci := d.dev.PCIAddress
		g := s.gpus[pci]
		if g == nil {
			g = &amdGPU{}
			s.gpus[pci] = g
		}
		d.gpu, g.dir = g, d.dev.DeviceDir
		if g.read == nil {
			g.read = sync.OnceValue(func() amdRead { return s.readGPUFiles(pci, g) })
		}
	}
}

// readGPUFiles reads a GPU's files under call_timeout on its lane.
func (s *amdBackend) readGPUFiles(pci string, g *amdGPU) amdRead {
	if g.lane.Hung() {
		return amdRead{} // its last read has not returned: down, without a new read
	}
	dir := g.dir
	snap, err := deadline.Call(&s.guard, &g.lane, func() (amdgpu.Snapshot, error) { return s.readGPU(dir), nil })
	if err != nil {
		s.countError(metadata.AttributeReadSourceDeadline)
		s.logger.Warn("Reading an AMD GPU's files passed call_timeout: the GPU is reported down until the read returns; the other GPUs keep reporting",
			zap.String("pci_bus_id", pci), zap.Duration("call_timeout", s.cfg.CallTimeout))
		return amdRead{}
	}
	s.countErrors(snap.Errors)
	return amdRead{snap: snap, ok: true}
}

// record writes a device's metrics. The GPU's own readings go to a whole GPU, and on a
// partitioned GPU to the partition that is the PCI device (partition 0), except utilization
// and memory, which the driver gives for the whole GPU only and which are left out on
// partitions. Process VRAM goes to the device whose KFD gpu_id the file names.
func (s *amdBackend) read(dev device, mb *metadata.MetricsBuilder, now pcommon.Timestamp) deviceID {
	d := dev.(*amdDevice)
	var r amdRead
	if d.gpu != nil {
		r = d.gpu.read()
	}
	s.record(d, r, mb, now)
	return deviceID{index: d.index, uuid: d.uuid}
}

func (s *amdBackend) record(d *amdDevice, r amdRead, mb *metadata.MetricsBuilder, now pcommon.Timestamp) {
	up := d.present && r.ok
	mb.RecordGpuUpDataPoint(now, boolLevel(up, 1))
	if r.ok && d.model == "" {
		d.model = r.snap.Model()
	}
	if r.ok && d.uuid == "" && r.snap.UniqueID != nil {
		// A KFD node without unique_id (or none at all): the card's own.
		d.uuid = deviceUUID(d.dev, *r.snap.UniqueID)
	}
	var opts []metadata.MetricAttributeOption
	if d.dev.PartitionDevice != "" {
		opts = append(opts, metadata.WithPartitionDeviceMetricAttribute(d.dev.PartitionDevice))
	}
	mb.RecordGpuInfoDataPoint(now, 1, d.model, d.dev.PCIAddress, s.driver, opts...)
	if !up {
		return
	}
	pids := s.vram[d.dev.GPUID]
	for _, pid := range slices.Sorted(maps.Keys(pids)) {
		mb.RecordGpuProcessMemoryUsedBytesDataPoint(now, int64(pids[pid]), strconv.Itoa(pid))
	}
	if d.dev.Partition != 0 {
		return
	}
	a := amdValues{s: s, d: d, snap: &r.snap, mb: mb, now: now, health: map[metadata.AttributeCondition]int64{}}
	if d.dev.Partitions == 1 {
		a.utilization()
	}
	a.thermalAndPower()
	a.clocks()
	a.pcie()
	a.ras()
	a.throttle(d.gpu)
	for cond, level := range a.health {
		mb.RecordGpuHealthDataPoint(now, level, cond)
	}
}

// amdValues maps one GPU's snapshot to metrics.
type amdValues struct {
	s      *amdBackend
	d      *amdDevice
	snap   *amdgpu.Snapshot
	mb     *metadata.MetricsBuilder
	now    pcommon.Timestamp
	health map[metadata.AttributeCondition]int64
	busy   bool
}

// first is the first of the readings that is there.
func first(vs ...*float64) *float64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

func (a *amdValues) metrics() amdgpu.GPUMetrics {
	if a.snap.Metrics == nil {
		return amdgpu.GPUMetrics{}
	}
	return *a.snap.Metrics
}

func (a *amdValues) utilization() {
	snap, m := a.snap, a.metrics()
	if u := first(snap.BusyPercent, m.GfxActivity); u != nil {
		a.busy = *u > 0
		a.mb.RecordGpuUtilizationDataPoint(a.now, *u, metadata.AttributeVenderAmd)
		a.mb.RecordRocmsmiUtilizationGpuDataPoint(a.now, *u)
	}
	if u := first(snap.MemBusyPercent, m.UMCActivity); u != nil {
		a.mb.RecordGpuMemoryControllerUtilizationDataPoint(a.now, *u)
	}
	if snap.VRAMTotal != nil && snap.VRAMUsed != nil {
		total, used := *snap.VRAMTotal, *snap.VRAMUsed
		a.mb.RecordGpuMemoryTotalBytesDataPoint(a.now, int64(total))
		a.mb.RecordGpuMemoryUsedBytesDataPoint(a.now, int64(used))
		if total > 0 {
			pct := float64(used) / float64(total) * 100
			a.mb.RecordGpuMemUtilizationDataPoint(a.now, pct, metadata.AttributeVenderAmd)
			a.mb.RecordRocmsmiUtilizationMemoryDataPoint(a.now, pct)
		}
	}
}

func (a *amdValues) thermalAndPower() {
	h, m := a.snap.Hwmon, a.metrics()
	if t := first(h.EdgeCelsius, m.EdgeCelsius); t != nil {
		a.mb.RecordRocmsmiTemperatureDataPoint(a.now, *t)
	}
	if t := first(h.JunctionCelsius, m.HotspotCelsius); t != nil {
		a.mb.RecordGpuJunctionTemperatureCelsiusDataPoint(a.now, *t)
	}
	if t := first(h.MemCelsius, m.MemCelsius); t != nil {
		a.mb.RecordGpuMemoryTemperatureCelsiusDataPoint(a.now, *t)
	}
	if w := first(h.PowerWatts, m.SocketPowerWatts); w != nil {
		a.mb.RecordGpuPowerWattsDataPoint(a.now, *w)
	}
	if h.PowerCapMinWatts != nil {
		a.mb.RecordGpuPowerLimitMinWattsDataPoint(a.now, *h.PowerCapMinWatts)
	}
	if h.PowerCapMaxWatts != nil {
		a.mb.RecordGpuPowerLimitMaxWattsDataPoint(a.now, *h.PowerCapMaxWatts)
	}
	if j, ok := m.EnergyJoules(); ok {
		a.mb.RecordGpuEnergyJoulesTotalDataPoint(a.now, j)
	}
}

func (a *amdValues) clocks() {
	h, m := a.snap.Hwmon, a.metrics()
	for _, c := range []struct {
		dpm      *amdgpu.DPM
		fallback []*float64
		clock    metadata.AttributeClock
	}{
		{a.snap.Sclk, []*float64{h.SclkMHz, m.CurrentGfxClkMHz}, metadata.AttributeClockSm},
		{a.snap.Mclk, []*float64{h.MclkMHz, m.CurrentUclkMHz}, metadata.AttributeClockMemory},
	} {
		var cur *float64
		if c.dpm != nil {
			if mhz, ok := c.dpm.CurrentMHz(); ok {
				f := float64(mhz)
				cur = &f
			}
			if mhz, ok := c.dpm.MaxMHz(); ok {
				a.mb.RecordGpuClockMaxMhzDataPoint(a.now, int64(mhz), c.clock)
			}
		}
		if cur = first(append([]*float64{cur}, c.fallback...)...); cur != nil {
			a.mb.RecordGpuClockMhzDataPoint(a.now, int64(*cur), c.clock)
		}
	}
}

func (a *amdValues) pcie() {
	s := a.snap
	for _, v := range []struct {
		value  *int
		record func(*metadata.MetricsBuilder, pcommon.Timestamp, int64)
	}{
		{s.LinkGen, (*metadata.MetricsBuilder).RecordGpuPcieLinkGenCurrentDataPoint},
		{s.LinkGenMax, (*metadata.MetricsBuilder).RecordGpuPcieLinkGenMaxDataPoint},
		{s.LinkWidth, (*metadata.MetricsBuilder).RecordGpuPcieLinkWidthCurrentDataPoint},
		{s.LinkWidthMax, (*metadata.MetricsBuilder).RecordGpuPcieLinkWidthMaxDataPoint},
	} {
		if v.value != nil {
			v.record(a.mb, a.now, int64(*v.value))
		}
	}
	if s.LinkGen != nil && s.LinkGenMax != nil && s.LinkWidth != nil && s.LinkWidthMax != nil {
		// As on NVIDIA: a lower generation is power saving at idle, fewer lanes a fault.
		degraded := *s.LinkWidth < *s.LinkWidthMax || (a.busy && *s.LinkGen < *s.LinkGenMax)
		a.health[metadata.AttributeConditionPcieLink] = boolLevel(degraded, healthWarning)
	}
}

// memoryBlock is the RAS block of the memory (the unified memory controller).
const memoryBlock = "umc"

func (a *amdValues) ras() {
	for _, block := range slices.Sorted(maps.Keys(a.snap.RAS)) {
		c := a.snap.RAS[block]
		a.mb.RecordGpuRasErrorsDataPoint(a.now, int64(c.Corrected), block, metadata.AttributeErrorTypeCorrected)
		a.mb.RecordGpuRasErrorsDataPoint(a.now, int64(c.Uncorrected), block, metadata.AttributeErrorTypeUncorrected)
	}
	if c, ok := a.snap.RAS[memoryBlock]; ok {
		a.health[metadata.AttributeConditionMemoryEcc] = boolLevel(c.Uncorrected > 0, healthWarning)
	}
	if len(a.snap.RASInaccessible) > 0 {
		// The GPU is in reset: its counts are absent for this collection, not read errors.
		a.s.logger.Debug("An AMD GPU's RAS counts are inaccessible (GPU in reset): left out of this collection",
			zap.String("pci_bus_id", a.d.dev.PCIAddress), zap.Strings("blocks", a.snap.RASInaccessible))
	}
}

// throttle reports the throttle reasons the GPU's gpu_metrics revision gives: v1_3's
// ASIC-independent mask, MI300's throttle_status (v1_4, v1_5), or which residency counters grew
// since the last collection (v1_6 on; none on the first). v1_1 and v1_2 carry only
// ASIC-dependent bits and give none.
func (a *amdValues) throttle(g *amdGPU) {
	m := a.snap.Metrics
	if m == nil {
		return
	}
	var t amdgpu.Throttle
	var ok bool
	switch {
	case m.Residency != nil:
		if g.residency != nil {
			t, ok = amdgpu.ThrottleFromResidency(*g.residency, *m.Residency)
		}
		g.residency = m.Residency
	case m.IndepThrottleStatus != nil:
		t, ok = amdgpu.ThrottleFromIndep(*m.IndepThrottleStatus), true
	case m.Revision.Content >= 4 && m.ThrottleStatus != nil:
		t, ok = amdgpu.ThrottleFromMI300(*m.ThrottleStatus), true
	}
	if !ok {
		return
	}
	for _, r := range []struct {
		on     bool
		reason metadata.AttributeReason
	}{{t.PowerCap, metadata.AttributeReasonPowerCap}, {t.Thermal, metadata.AttributeReasonSwThermal}, {t.HWSlowdown, metadata.AttributeReasonHwSlowdown}} {
		a.mb.RecordGpuClockEventReasonDataPoint(a.now, boolLevel(r.on, 1), r.reason)
	}
	a.health[metadata.AttributeConditionThermal] = boolLevel(t.Thermal, healthWarning)
	a.health[metadata.AttributeConditionPower] = boolLevel(t.HWSlowdown, healthWarning)
}
