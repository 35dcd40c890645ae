// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// gpu_health values.
const (
	healthOK      = 0
	healthWarning = 1
	healthFatal   = 2
)

// gpuRead is one collection of one GPU. The first call that finds the GPU lost, needing a
// reset or past its deadline ends it: the GPU is reported down and its remaining calls are not
// made, while the other GPUs, collected in parallel, go on. Its steps run in order and hand on
// what later ones need.
type gpuRead struct {
	s      *nvmlBackend
	gpu    *gpuState
	dev    nvml.Device
	mb     *metadata.MetricsBuilder
	now    pcommon.Timestamp
	down   nvml.Return
	health map[metadata.AttributeCondition]int64
	// util is the GPU utilization read this collection, -1 when unknown.
	util int64
	// memoryUsed is the framebuffer in use, when haveMemory.
	memoryUsed uint64
	haveMemory bool
	// processes are the PIDs on the GPU in order, when haveProcesses.
	processes     []uint32
	haveProcesses bool
	// instances are the GPU instance ids of its MIG instances in order (none outside MIG mode),
	// when instancesKnown.
	instances      []int
	instancesKnown bool
}

// read makes one NVML call on the GPU through callGPU. It reports false when the value is
// unavailable: not supported (the metric is left out, never faked), another error, or the GPU
// went down.
func read[T any](r *gpuRead, call string, f func() (T, nvml.Return)) (T, bool) {
	var zero T
	if r.down != nvml.SUCCESS {
		return zero, false
	}
	v, ret := callGPU(r.s, r.gpu, call, f)
	switch ret {
	case nvml.SUCCESS:
		return v, true
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED, errDeadline:
		r.down = ret
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_FOUND:
	default:
		r.s.logger.Debug("NVML call failed", zap.Int("gpu", r.gpu.id.index), zap.String("call", call), zap.String("error", ret.Error()))
	}
	return zero, false
}

// collectGPU records one GPU into its own MetricsBuilder (GPUs are collected in parallel).
func (s *nvmlBackend) collectGPU(g *gpuState, mb *metadata.MetricsBuilder, now pcommon.Timestamp) {
	r := &gpuRead{s: s, gpu: g, dev: g.id.handle, mb: mb, now: now, down: g.handleErr, health: map[metadata.AttributeCondition]int64{}, util: -1}
	if r.down == nvml.SUCCESS {
		for _, step := range []func(*gpuRead){
			readUtilization, readMemory, readProcesses, readMemoryLeak, readProcessUtilization,
			readThermalAndPower, readFieldValues, readClocks, readLimits, readPCIe, readNVLink, readFabric, readECC,
			readRetiredPages, readRemappedRows, readMIG, readGPM, readVGPULicense,
		} {
			step(r)
		}
	}
	switch r.down {
	case nvml.SUCCESS:
		mb.RecordGpuUpDataPoint(now, 1)
		r.health[metadata.AttributeConditionNvml] = healthOK
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED:
		mb.RecordGpuUpDataPoint(now, 0)
		r.health[metadata.AttributeConditionNvml] = healthFatal
		g.gpm.release()
	default:
		mb.RecordGpuUpDataPoint(now, 0)
		r.health[metadata.AttributeConditionNvml] = healthWarning
		g.gpm.forgetPrevious()
	}
	r.health[metadata.AttributeConditionXid] = s.xids.healthOf(g.id.uuid)
	for cond, level := range r.health {
		mb.RecordGpuHealthDataPoint(now, level, cond)
	}
	codes, counts := s.xids.countsOf(g.id.uuid)
	for i, code := range codes {
		mb.RecordGpuXidErrorsTotalDataPoint(now, counts[i], strconv.FormatUint(code, 10), resolutionAttribute(s.xids.table.Lookup(code).Resolution))
	}
	for call, n := range g.timeouts {
		mb.RecordGpuNvmlTimeoutsTotalDataPoint(now, n, call)
	}
	mb.RecordGpuInfoDataPoint(now, 1, g.id.model, g.id.pciBusID, s.lib.driver)
	if g.recovery.known {
		// Also while the GPU cannot be read: the driver's last word on it stands.
		mb.RecordGpuRecoveryActionDataPoint(now, int64(g.recovery.action))
	}
}

func (r *gpuRead) worst(cond metadata.AttributeCondition, level int64) {
	r.health[cond] = max(r.health[cond], level)
}

func readUtilization(r *gpuRead) {
	if u, ok := read(r, "GetUtilizationRates", r.dev.GetUtilizationRates); ok {
		r.util = int64(u.Gpu)
		r.mb.RecordGpuUtilizationDataPoint(r.now, float64(u.Gpu), metadata.AttributeVenderNvidia)
		r.mb.RecordNvidiasmiUtilizationGpuDataPoint(r.now, float64(u.Gpu))
		r.mb.RecordGpuMemoryControllerUtilizationDataPoint(r.now, float64(u.Memory))
	}
	for _, c := range []struct {
		call  string
		get   func() (uint32, uint32, nvml.Return)
		codec metadata.AttributeCodec
	}{
		{"GetEncoderUtilization", r.dev.GetEncoderUtilization, metadata.AttributeCodecEncoder},
		{"GetDecoderUtilization", r.dev.GetDecoderUtilization, metadata.AttributeCodecDecoder},
	} {
		pct, ok := read(r, c.call, func() (uint32, nvml.Return) {
			pct, _, ret := c.get() // the second value is NVML's sampling period
			return pct, ret
		})
		if ok {
			r.mb.RecordGpuCodecUtilizationDataPoint(r.now, float64(pct), c.codec)
		}
	}
}

// readMemory reads the framebuffer: total, used, free and, from v2, the driver's reserved part.
func readMemory(r *gpuRead) {
	var total uint64
	if r.s.lib.has(symMemoryInfoV2) {
		// v2 leaves out the driver's reserved memory, which v1 counts as used.
		var m nvml.Memory_v2
		if m, r.haveMemory = read(r, "GetMemoryInfo_v2", r.dev.GetMemoryInfo_v2); r.haveMemory {
			total, r.memoryUsed = m.Total, m.Used
			r.mb.RecordGpuMemoryFreeBytesDataPoint(r.now, int64(m.Free))
			r.mb.RecordGpuMemoryReservedBytesDataPoint(r.now, int64(m.Reserved))
		}
	} else {
		var m nvml.Memory
		if m, r.haveMemory = read(r, "GetMemoryInfo", r.dev.GetMemoryInfo); r.haveMemory {
			total, r.memoryUsed = m.Total, m.Used
			r.mb.RecordGpuMemoryFreeBytesDataPoint(r.now, int64(m.Free))
		}
	}
	if !r.haveMemory {
		return
	}
	r.mb.RecordGpuMemoryTotalBytesDataPoint(r.now, int64(total))
	r.mb.RecordGpuMemoryUsedBytesDataPoint(r.now, int64(r.memoryUsed))
	if total > 0 {
		pct := float64(r.memoryUsed) / float64(total) * 100
		r.mb.RecordGpuMemUtilizationDataPoint(r.now, pct, metadata.AttributeVenderNvidia)
		r.mb.RecordNvidiasmiUtilizationMemoryDataPoint(r.now, pct)
	}
}

// readProcesses reports the framebuffer each process on the GPU holds, compute and graphics
// together.
func readProcesses(r *gpuRead) {
	compute, okCompute := read(r, "GetComputeRunningProcesses", r.dev.GetComputeRunningProcesses)
	graphics, okGraphics := read(r, "GetGraphicsRunningProcesses", r.dev.GetGraphicsRunningProcesses)
	if r.haveProcesses = okCompute || okGraphics; !r.haveProcesses {
		return
	}
	memory := map[uint32]uint64{}
	for _, p := range append(compute, graphics...) {
		memory[p.Pid] += p.UsedGpuMemory
	}
	r.processes = make([]uint32, 0, len(memory))
	for pid := range memory {
		r.processes = append(r.processes, pid)
	}
	slices.Sort(r.processes)
	for _, pid := range r.processes {
		r.mb.RecordGpuProcessMemoryUsedBytesDataPoint(r.now, int64(memory[pid]), strconv.FormatUint(uint64(pid), 10))
	}
}

// readMemoryLeak is 1 when framebuffer memory is in use that no process holds.
func readMemoryLeak(r *gpuRead) {
	if !r.haveMemory || !r.haveProcesses {
		return
	}
	r.mb.RecordNvidiasmiMemoryLeakCountDataPoint(r.now, boolLevel(len(r.processes) == 0 && r.memoryUsed > uint64(r.s.cfg.MemoryLeakThreshold), 1))
}

// readProcessUtilization reports each process's SM use over the interval. It passes the newest
// sample seen, so NVML returns this interval's samples only; ERROR_NOT_FOUND means no process
// ran a kernel since then, a real 0 for each process.
func readProcessUtilization(r *gpuRead) {
	if !r.haveProcesses {
		return
	}
	last := r.gpu.lastProcessSample
	samples, ok := read(r, "GetProcessUtilization", func() ([]nvml.ProcessUtilizationSample, nvml.Return) {
		samples, ret := r.dev.GetProcessUtilization(last)
		if ret == nvml.ERROR_NOT_FOUND {
			return nil, nvml.SUCCESS
		}
		return samples, ret
	})
	if !ok {
		return
	}
	sm := map[uint32]uint32{}
	for _, smp := range samples {
		if smp.TimeStamp > last {
			sm[smp.Pid] = max(sm[smp.Pid], smp.SmUtil)
			r.gpu.lastProcessSample = max(r.gpu.lastProcessSample, smp.TimeStamp)
		}
	}
	for _, pid := range r.processes {
		r.mb.RecordGpuProcessSmUtilizationDataPoint(r.now, int64(sm[pid]), strconv.FormatUint(uint64(pid), 10))
	}
}

func readThermalAndPower(r *gpuRead) {
	mb := r.mb
	if t, ok := read(r, "GetTemperature", func() (uint32, nvml.Return) { return r.dev.GetTemperature(nvml.TEMPERATURE_GPU) }); ok {
		mb.RecordNvidiasmiTemperatureDataPoint(r.now, float64(t))
	}
	if mw, ok := read(r, "GetPowerUsage", r.dev.GetPowerUsage); ok {
		mb.RecordGpuPowerWattsDataPoint(r.now, float64(mw)/1000)
	}
	if r.s.lib.has(symTotalEnergy) {
		if mj, ok := read(r, "GetTotalEnergyConsumption", r.dev.GetTotalEnergyConsumption); ok {
			mb.RecordGpuEnergyJoulesTotalDataPoint(r.now, float64(mj)/1000)
		}
	}
}

// scopeAllLinks asks a per-link NVLink field for its sum over every link.
const scopeAllLinks = math.MaxUint32

// maxValidCelsius is the highest memory temperature DCGM accepts from NVML; above it the
// value means "no reading".
const maxValidCelsius = 200

// readFieldValues reads what NVML gives only as field values, in one call (one deadline): the
// memory temperature, NVLink's payload counters (the ones DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL is
// computed from) and the driver's recovery action. A field the GPU or driver lacks answers
// NOT_SUPPORTED in its own return and is left out.
func readFieldValues(r *gpuRead) {
	values, ok := read(r, "GetFieldValues", func() ([]nvml.FieldValue, nvml.Return) {
		v := []nvml.FieldValue{
			{FieldId: nvml.FI_DEV_MEMORY_TEMP},
			{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: scopeAllLinks},
			{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: scopeAllLinks},
			{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION},
		}
		return v, r.dev.GetFieldValues(v)
	})
	if !ok {
		return
	}
	mb := r.mb
	for _, v := range values {
		if v.FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
			r.gpu.recovery = r.s.recoveryActionOf(r.gpu, v)
			continue
		}
		if !fieldOK(r.s, r.gpu, v) {
			continue
		}
		switch v.FieldId {
		case nvml.FI_DEV_MEMORY_TEMP:
			// An unsigned int whatever ValueType says: R545 drivers label it a double.
			if c := binary.NativeEndian.Uint32(v.Value[:4]); c <= maxValidCelsius {
				mb.RecordGpuMemoryTemperatureCelsiusDataPoint(r.now, float64(c))
			}
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
			dir := metadata.AttributeDirectionRx
			if v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX {
				dir = metadata.AttributeDirectionTx
			}
			kib := binary.NativeEndian.Uint64(v.Value[:])
			mb.RecordGpuNvlinkDataBytesTotalDataPoint(r.now, int64(kib)*1024, dir)
		}
	}
}

// fieldOK reports whether a field value was read; a failure other than NOT_SUPPORTED (the GPU
// or driver lacks the field: every collection on such a GPU) is logged at debug.
func fieldOK(s *nvmlBackend, g *gpuState, v nvml.FieldValue) bool {
	ret := nvml.Return(v.NvmlReturn)
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		s.logger.Debug("NVML field value failed", zap.Int("gpu", g.id.index), zap.Uint32("field", v.FieldId), zap.String("error", ret.Error()))
	}
	return ret == nvml.SUCCESS
}

// recoveryActionOf is the recovery action field 230's value says, unknown (not recorded) where
// the driver does not report it (before R565: NOT_SUPPORTED on every collection, no error). A
// change is logged: the driver asking for an action is news an operator may read in the log
// before any alert.
func (s *nvmlBackend) recoveryActionOf(g *gpuState, v nvml.FieldValue) recoveryReading {
	if !fieldOK(s, g, v) {
		return recoveryReading{}
	}
	// An unsigned int (nvmlDeviceGpuRecoveryAction_t), whatever the driver's ValueType.
	now := recoveryReading{action: recoveryaction.Action(binary.NativeEndian.Uint32(v.Value[:4])), known: true}
	if now != g.recovery && (g.recovery.known || now.action != recoveryaction.None) {
		level := zap.WarnLevel
		if now.action == recoveryaction.None {
			level = zap.InfoLevel
		}
		s.logger.Log(level, "The driver's recovery action for the GPU changed", zap.Int("gpu", g.id.index), zap.String("uuid", g.id.uuid),
			zap.String("recovery_action", now.action.String()), zap.String("action", now.action.Words()), zap.String("was", g.recovery.action.String()))
	}
	return now
}

// clockReasons are NVML's clock event reason bits with dcgm-exporter's names for them. The
// HW slowdown bits exist in go-nvml only under their older ClocksThrottleReason names.
var clockReasons = []struct {
	bit    uint64
	reason metadata.AttributeReason
}{
	{nvml.ClocksEventReasonGpuIdle, metadata.AttributeReasonGpuIdle},
	{nvml.ClocksEventReasonApplicationsClocksSetting, metadata.AttributeReasonClocksSetting},
	{nvml.ClocksEventReasonSwPowerCap, metadata.AttributeReasonPowerCap},
	{nvml.ClocksThrottleReasonHwSlowdown, metadata.AttributeReasonHwSlowdown},
	{nvml.ClocksEventReasonSyncBoost, metadata.AttributeReasonSyncBoost},
	{nvml.ClocksEventReasonSwThermalSlowdown, metadata.AttributeReasonSwThermal},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, metadata.AttributeReasonHwThermal},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, metadata.AttributeReasonHwPowerBrake},
	{nvml.ClocksEventReasonDisplayClockSetting, metadata.AttributeReasonDisplayClocks},
	{nvml.ClocksEventReasonBoardLimit, metadata.AttributeReasonBoardLimit},
	{nvml.ClocksEventReasonReliability, metadata.AttributeReasonReliability},
}

// clockDomains are the clocks reported, with NVML's names for them.
var clockDomains = []struct {
	typ   nvml.ClockType
	clock metadata.AttributeClock
}{{nvml.CLOCK_SM, metadata.AttributeClockSm}, {nvml.CLOCK_MEM, metadata.AttributeClockMemory}}

func readClocks(r *gpuRead) {
	mb := r.mb
	for _, c := range clockDomains {
		if mhz, ok := read(r, "GetClockInfo", func() (uint32, nvml.Return) { return r.dev.GetClockInfo(c.typ) }); ok {
			mb.RecordGpuClockMhzDataPoint(r.now, int64(mhz), c.clock)
		}
	}

	var bits uint64
	var haveReasons bool
	if r.s.lib.has(symClocksEventReasons) {
		bits, haveReasons = read(r, "GetCurrentClocksEventReasons", r.dev.GetCurrentClocksEventReasons)
	} else {
		bits, haveReasons = read(r, "GetCurrentClocksThrottleReasons", r.dev.GetCurrentClocksThrottleReasons)
	}
	var active []string
	if haveReasons {
		for _, cr := range clockReasons {
			on := int64(0)
			if bits&cr.bit != 0 {
				on = 1
				active = append(active, cr.reason.String())
			}
			mb.RecordGpuClockEventReasonDataPoint(r.now, on, cr.reason)
		}
		thermal := bits&(nvml.ClocksEventReasonSwThermalSlowdown|nvml.ClocksThrottleReasonHwThermalSlowdown) != 0
		power := bits&(nvml.ClocksThrottleReasonHwSlowdown|nvml.ClocksThrottleReasonHwPowerBrakeSlowdown) != 0
		r.worst(metadata.AttributeConditionThermal, boolLevel(thermal, healthWarning))
		r.worst(metadata.AttributeConditionPower, boolLevel(power, healthWarning))
	}
	if p, ok := read(r, "GetPerformanceState", r.dev.GetPerformanceState); ok && p != nvml.PSTATE_UNKNOWN {
		mb.RecordNvidiasmiPerformanceStateDataPoint(r.now, int64(p), strings.Join(active, ","))
	}
}

// readLimits reports how far the GPU's clocks and power limit can go: what current clocks and
// power draw are read against.
func readLimits(r *gpuRead) {
	for _, c := range clockDomains {
		if mhz, ok := read(r, "GetMaxClockInfo", func() (uint32, nvml.Return) { return r.dev.GetMaxClockInfo(c.typ) }); ok {
			r.mb.RecordGpuClockMaxMhzDataPoint(r.now, int64(mhz), c.clock)
		}
	}
	limits, ok := read(r, "GetPowerManagementLimitConstraints", func() ([2]uint32, nvml.Return) {
		lowest, highest, ret := r.dev.GetPowerManagementLimitConstraints()
		return [2]uint32{lowest, highest}, ret
	})
	if ok {
		r.mb.RecordGpuPowerLimitMinWattsDataPoint(r.now, float64(limits[0])/1000)
		r.mb.RecordGpuPowerLimitMaxWattsDataPoint(r.now, float64(limits[1])/1000)
	}
}

func readPCIe(r *gpuRead) {
	mb := r.mb
	for _, c := range []struct {
		counter nvml.PcieUtilCounter
		dir     metadata.AttributeDirection
	}{{nvml.PCIE_UTIL_RX_BYTES, metadata.AttributeDirectionRx}, {nvml.PCIE_UTIL_TX_BYTES, metadata.AttributeDirectionTx}} {
		if kbps, ok := read(r, "GetPcieThroughput", func() (uint32, nvml.Return) { return r.dev.GetPcieThroughput(c.counter) }); ok {
			mb.RecordGpuPcieThroughputBytesPerSecondDataPoint(r.now, int64(kbps)*1024, c.dir)
		}
	}
	if n, ok := read(r, "GetPcieReplayCounter", r.dev.GetPcieReplayCounter); ok {
		mb.RecordGpuPcieReplaysTotalDataPoint(r.now, int64(n))
	}
	genCur, ok1 := read(r, "GetCurrPcieLinkGeneration", r.dev.GetCurrPcieLinkGeneration)
	genMax, ok2 := read(r, "GetMaxPcieLinkGeneration", r.dev.GetMaxPcieLinkGeneration)
	widthCur, ok3 := read(r, "GetCurrPcieLinkWidth", r.dev.GetCurrPcieLinkWidth)
	widthMax, ok4 := read(r, "GetMaxPcieLinkWidth", r.dev.GetMaxPcieLinkWidth)
	if ok1 {
		mb.RecordGpuPcieLinkGenCurrentDataPoint(r.now, int64(genCur))
	}
	if ok2 {
		mb.RecordGpuPcieLinkGenMaxDataPoint(r.now, int64(genMax))
	}
	if ok3 {
		mb.RecordGpuPcieLinkWidthCurrentDataPoint(r.now, int64(widthCur))
	}
	if ok4 {
		mb.RecordGpuPcieLinkWidthMaxDataPoint(r.now, int64(widthMax))
	}
	if ok1 && ok2 && ok3 && ok4 {
		// GPUs lower the link generation at idle to save power, so only a busy GPU below its
		// generation is degraded; fewer lanes than the maximum is degraded at any load.
		busy := r.util > 0
		r.worst(metadata.AttributeConditionPcieLink, boolLevel(widthCur < widthMax || (busy && genCur < genMax), healthWarning))
	}
}

var nvlinkCounters = []struct {
	counter nvml.NvLinkErrorCounter
	attr    metadata.AttributeNvlinkCounter
}{
	{nvml.NVLINK_ERROR_DL_REPLAY, metadata.AttributeNvlinkCounterReplay},
	{nvml.NVLINK_ERROR_DL_RECOVERY, metadata.AttributeNvlinkCounterRecovery},
	{nvml.NVLINK_ERROR_DL_CRC_FLIT, metadata.AttributeNvlinkCounterCrcFlit},
	{nvml.NVLINK_ERROR_DL_CRC_DATA, metadata.AttributeNvlinkCounterCrcData},
}

// readNVLink reports each link's state and the error counters of the active links; the first
// link NVML refuses ends the list (GPUs have 4 to 18 links, PCIe cards none). A link seen up
// since the GPU was first seen and down now is a fault: what links a GPU should have up is what
// it had up, as no NVML call says which links the system wires (a link already down when the
// receiver starts is reported down but is no fault).
func readNVLink(r *gpuRead) {
	lost := false
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ok := read(r, "GetNvLinkState", func() (nvml.EnableState, nvml.Return) { return r.dev.GetNvLinkState(link) })
		if !ok {
			break
		}
		bit := uint64(1) << link
		up := state == nvml.FEATURE_ENABLED
		r.mb.RecordGpuNvlinkStateDataPoint(r.now, boolLevel(up, 1), strconv.Itoa(link))
		if !up {
			lost = lost || r.gpu.linksSeenUp&bit != 0
			continue
		}
		r.gpu.linksSeenUp |= bit
		for _, c := range nvlinkCounters {
			if n, ok := read(r, "GetNvLinkErrorCounter", func() (uint64, nvml.Return) { return r.dev.GetNvLinkErrorCounter(link, c.counter) }); ok {
				r.mb.RecordGpuNvlinkErrorsTotalDataPoint(r.now, int64(n), strconv.Itoa(link), c.attr)
			}
		}
	}
	if r.gpu.linksSeenUp != 0 {
		r.worst(metadata.AttributeConditionNvlink, boolLevel(lost, healthWarning))
	}
}

func readECC(r *gpuRead) {
	mb := r.mb
	var volatileUncorrected uint64
	var haveECC bool
	for _, e := range []struct {
		typ     nvml.MemoryErrorType
		counter nvml.EccCounterType
		errType metadata.AttributeErrorType
		ctrType metadata.AttributeCounterType
		smi     metadata.AttributeEccType
	}{
		{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC, metadata.AttributeErrorTypeCorrected, metadata.AttributeCounterTypeVolatile, metadata.AttributeEccTypeSingle},
		{nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, metadata.AttributeErrorTypeUncorrected, metadata.AttributeCounterTypeVolatile, metadata.AttributeEccTypeDouble},
		{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC, metadata.AttributeErrorTypeCorrected, metadata.AttributeCounterTypeAggregate, metadata.AttributeEccTypeSingle},
		{nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC, metadata.AttributeErrorTypeUncorrected, metadata.AttributeCounterTypeAggregate, metadata.AttributeEccTypeDouble},
	} {
		n, ok := read(r, "GetTotalEccErrors", func() (uint64, nvml.Return) { return r.dev.GetTotalEccErrors(e.typ, e.counter) })
		if !ok {
			continue
		}
		haveECC = true
		mb.RecordGpuEccErrorsDataPoint(r.now, int64(n), e.errType, e.ctrType)
		if e.counter == nvml.VOLATILE_ECC {
			// OpenPAI's nvidiasmi_ecc_error_count is the volatile count.
			mb.RecordNvidiasmiEccErrorCountDataPoint(r.now, int64(n), e.smi)
			if e.typ == nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
				volatileUncorrected = n
			}
		}
	}
	if haveECC {
		r.worst(metadata.AttributeConditionMemoryEcc, boolLevel(volatileUncorrected > 0, healthWarning))
	}
}

// readRetiredPages covers GPUs before Ampere; later ones answer NOT_SUPPORTED and the metric
// is left out (row remapping replaces it).
func readRetiredPages(r *gpuRead) {
	for _, c := range []struct {
		cause nvml.PageRetirementCause
		typ   metadata.AttributeEccType
	}{{nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, metadata.AttributeEccTypeSingle}, {nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, metadata.AttributeEccTypeDouble}} {
		pages, ok := read(r, "GetRetiredPages", func() ([]uint64, nvml.Return) { return r.dev.GetRetiredPages(c.cause) })
		if !ok {
			return
		}
		r.mb.RecordNvidiasmiRetiredPageCountDataPoint(r.now, int64(len(pages)), c.typ)
	}
	if pending, ok := read(r, "GetRetiredPagesPendingStatus", r.dev.GetRetiredPagesPendingStatus); ok {
		r.worst(metadata.AttributeConditionRetiredPages, boolLevel(pending == nvml.FEATURE_ENABLED, healthWarning))
	}
}

type remappedRows struct {
	corrected, uncorrected int
	pending, failed        bool
}

func readRemappedRows(r *gpuRead) {
	if !r.s.lib.has(symRemappedRows) {
		return
	}
	rows, ok := read(r, "GetRemappedRows", func() (remappedRows, nvml.Return) {
		c, u, p, f, ret := r.dev.GetRemappedRows()
		return remappedRows{c, u, p, f}, ret
	})
	if !ok {
		return
	}
	mb := r.mb
	mb.RecordGpuRemappedRowsDataPoint(r.now, int64(rows.corrected), metadata.AttributeErrorTypeCorrected)
	mb.RecordGpuRemappedRowsDataPoint(r.now, int64(rows.uncorrected), metadata.AttributeErrorTypeUncorrected)
	mb.RecordGpuRemappedRowsPendingDataPoint(r.now, boolLevel(rows.pending, 1))
	mb.RecordGpuRemappedRowsFailedDataPoint(r.now, boolLevel(rows.failed, 1))
	level := boolLevel(rows.pending, healthWarning)
	if rows.failed {
		level = healthFatal
	}
	r.worst(metadata.AttributeConditionRowRemap, level)
}

type migInstance struct {
	uuid   string
	gi, ci int
	memory nvml.Memory
}

// readMIG reports the MIG instances of a GPU in MIG mode: identity and memory, which is what
// NVML gives per instance (their activity is GPM's, readGPM), and hands on their GPU instances.
func readMIG(r *gpuRead) {
	if !r.s.lib.has(symMigMode) {
		return
	}
	mode, ok := read(r, "GetMigMode", func() (int, nvml.Return) {
		current, _, ret := r.dev.GetMigMode()
		return current, ret
	})
	if !ok {
		return
	}
	r.mb.RecordGpuMigEnabledDataPoint(r.now, boolLevel(mode == nvml.DEVICE_MIG_ENABLE, 1))
	if mode != nvml.DEVICE_MIG_ENABLE {
		r.instancesKnown = true
		return
	}
	slots, ok := read(r, "GetMaxMigDeviceCount", r.dev.GetMaxMigDeviceCount)
	if !ok {
		return
	}
	// A GPU instance with several compute instances has a MIG device for each.
	defer func() {
		slices.Sort(r.instances)
		r.instances = slices.Compact(r.instances)
		r.instancesKnown = r.down == nvml.SUCCESS
	}()
	for i := range slots {
		// ERROR_NOT_FOUND: no instance in this slot.
		mig, ok := read(r, "GetMigDeviceHandleByIndex", func() (nvml.Device, nvml.Return) { return r.dev.GetMigDeviceHandleByIndex(i) })
		if !ok {
			continue
		}
		// The four calls on the instance share one deadline, named together in the call label.
		inst, ok := read(r, "GetMigDeviceInfo", func() (migInstance, nvml.Return) {
			var m migInstance
			var ret nvml.Return
			if m.uuid, ret = mig.GetUUID(); ret != nvml.SUCCESS {
				return m, ret
			}
			if m.gi, ret = mig.GetGpuInstanceId(); ret != nvml.SUCCESS {
				return m, ret
			}
			if m.ci, ret = mig.GetComputeInstanceId(); ret != nvml.SUCCESS {
				return m, ret
			}
			m.memory, ret = mig.GetMemoryInfo()
			return m, ret
		})
		if !ok {
			continue
		}
		r.instances = append(r.instances, inst.gi)
		gi, ci := strconv.Itoa(inst.gi), strconv.Itoa(inst.ci)
		r.mb.RecordGpuMigMemoryTotalBytesDataPoint(r.now, int64(inst.memory.Total), inst.uuid, gi, ci)
		r.mb.RecordGpuMigMemoryUsedBytesDataPoint(r.now, int64(inst.memory.Used), inst.uuid, gi, ci)
	}
}

// readVGPULicense reports the vGPU license as DCGM does: 0 on a GPU without vGPU licensing
// (bare metal), else whether the vGPU feature is licensed.
func readVGPULicense(r *gpuRead) {
	f, ok := read(r, "GetGridLicensableFeatures", r.dev.GetGridLicensableFeatures)
	if !ok {
		return
	}
	if f.IsGridLicenseSupported == 0 {
		r.mb.RecordGpuVgpuLicensedDataPoint(r.now, 0)
		return
	}
	n := min(int(f.LicensableFeaturesCount), len(f.GridLicensableFeatures))
	for i := range n {
		feature := &f.GridLicensableFeatures[i]
		if feature.FeatureCode == uint32(nvml.GRID_LICENSE_FEATURE_CODE_VGPU) {
			r.mb.RecordGpuVgpuLicensedDataPoint(r.now, boolLevel(feature.FeatureState > 0, 1))
			return
		}
	}
}

// boolLevel is level when b holds, else 0: a gauge's 1 or healthWarning, equal today.
func boolLevel(b bool, level int64) int64 { //nolint:unparam // level names which of the two it is
	if b {
		return level
	}
	return 0
}
