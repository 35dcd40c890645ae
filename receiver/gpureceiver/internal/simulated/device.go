// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
)

// Readings of an idle GPU, for signals a scenario leaves out.
const (
	idleTemperature = 35
	idlePower       = 60
	idleSMClockMHz  = 210
	pcieWidth       = 16
	// reservedMiB is the framebuffer the driver keeps for itself (about half a GiB on A100/H100).
	reservedMiB = 512
	// memoryAboveCore is how much warmer the HBM runs than the GPU core.
	memoryAboveCore = 5
	// nvlinkKiBPerSecond is each direction's NVLink payload at 100 % utilization (all-reduce
	// traffic is symmetric): 50 GB/s.
	nvlinkKiBPerSecond = 50e9 / 1024
	// nvmlSamplingPeriodUs is the sampling period NVML reports with codec utilization.
	nvmlSamplingPeriodUs = 167_000
	// spinPowerShare is the part of its working power above idle that a GPU draws while its
	// kernels spin waiting in a collective: a little above idle, as the spinning kernels keep a
	// few SMs busy (the simulation's assumption, not a measurement).
	spinPowerShare = 0.1
)

// Device is one simulated GPU. Identity (name, UUID, index, MIG) comes from the embedded mock
// device; the readings below follow the scenario.
type Device struct {
	*server.Device
	srv     *Server
	profile profile
	pci     nvml.PciInfo

	utilization, memory, temperature, power *gpuscenario.Track
	activity                                gpuscenario.Activity
	processes                               []gpuscenario.Process
	faults                                  []*gpuscenario.Fault
	migs                                    []*MIGDevice

	// energyMJ and nvlinkKiB integrate power and NVLink traffic over the readings so far.
	energyMJ, nvlinkKiB integral
	// gpm is what a GPM sample of the whole GPU reads.
	gpm gpmTarget
}

// integral is a signal's integral over the readings so far (trapezoids between readings).
type integral struct {
	mu  sync.Mutex
	at  time.Duration
	sum float64
}

// upTo extends the integral of f to t and returns it.
func (i *integral) upTo(t time.Duration, f func(time.Duration) float64) float64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	if t > i.at {
		i.sum += (f(i.at) + f(t)) / 2 * (t - i.at).Seconds()
		i.at = t
	}
	return i.sum
}

func newDevice(s *Server, sc *gpuscenario.Scenario, p profile, index int, md *server.Device) *Device {
	md.UUID = sc.UUID(index)
	if index < len(sc.Captured) {
		p = captured(md, p, sc.Captured[index])
	}
	sig, activity := sc.SignalsOf(index), sc.Activity
	for _, ds := range sc.Devices {
		if ds.Index == index && ds.Activity != nil {
			activity = ds.Activity
		}
	}
	if activity == nil {
		activity = &gpuscenario.DefaultActivity
	}
	seed := uint64(sc.Seed)<<16 ^ uint64(index)<<4
	d := &Device{
		Device:      md,
		srv:         s,
		profile:     p,
		pci:         pciInfo(sc.PCIAddress(index), md.Config.PciDeviceId),
		utilization: gpuscenario.NewTrack(sig.Utilization, 0, seed|1),
		memory:      gpuscenario.NewTrack(sig.Memory, 0, seed|2),
		temperature: gpuscenario.NewTrack(sig.Temperature, idleTemperature, seed|3),
		power:       gpuscenario.NewTrack(sig.Power, idlePower, seed|4),
		activity:    *activity,
	}
	d.gpm = gpmTarget{gpu: d, load: d.load}
	for _, proc := range sc.Processes {
		if proc.GPU == index {
			d.processes = append(d.processes, proc)
		}
	}
	for i := range sc.Faults {
		if sc.Faults[i].GPU == index {
			d.faults = append(d.faults, &sc.Faults[i])
		}
	}
	migUUIDs := sc.MIGUUIDs(index)
	for _, m := range sc.MIG {
		if m.GPU != index {
			continue
		}
		for i := range m.Instances {
			uuid := migUUIDs[len(d.migs)]
			// Real layouts number GPU instances from 1 up, each with compute instance 0. An
			// instance has the share of the GPU's SMs that it has of its memory.
			mig := &MIGDevice{
				parent: d, uuid: uuid, gi: i + 1, memory: m.MemoryMiB << 20, used: m.UsedMiB << 20,
				share: float64(m.MemoryMiB) / float64(md.Config.MemoryMB), busy: i < m.Busy,
			}
			mig.gpm = gpmTarget{gpu: d, instance: true, load: mig.load}
			d.migs = append(d.migs, mig)
		}
	}
	return d
}

// captured is a device as a capture recorded it: its model, memory and PCI address, and the
// clocks and power limits it has (the profile's stand for those it has not).
func captured(md *server.Device, p profile, c gpuscenario.CapturedGPU) profile {
	md.Config.Name, md.Config.MemoryMB = c.Model, c.MemoryMiB
	if c.PCIDeviceID != 0 {
		md.Config.PciDeviceId = c.PCIDeviceID
	}
	for _, v := range []struct{ from, to *uint32 }{
		{&c.MaxSMClockMHz, &p.smClockMHz},
		{&c.MaxMemClockMHz, &p.memClockMHz},
		{&c.PowerMinW, &p.powerMinW},
		{&c.PowerMaxW, &p.powerMaxW},
	} {
		if *v.from != 0 {
			*v.to = *v.from
		}
	}
	return p
}

// pciInfo is NVML's PCI info of the GPU at address.
func pciInfo(a gpuscenario.PCIAddress, deviceID uint32) nvml.PciInfo {
	p := nvml.PciInfo{Domain: a.Domain, Bus: uint32(a.Bus), Device: uint32(a.Device), PciDeviceId: deviceID}
	copyCString(p.BusId[:], fmtBusID(p, "%08X:%02X:%02X.0"))
	copyCString(p.BusIdLegacy[:], fmtBusID(p, "%04X:%02X:%02X.0"))
	return p
}

// check applies the faults that stop a call: a hang blocks it until the hang ends, a lost GPU
// or one that needs a reset answers with NVML's error. It returns the scenario time.
func (d *Device) check() (time.Duration, nvml.Return) {
	t := d.srv.elapsed()
	ret := nvml.SUCCESS
	for _, f := range d.faults {
		switch {
		case f.Kind == gpuscenario.FaultHang && f.Active(t):
			d.srv.block(f.At + f.Duration)
			t = d.srv.elapsed()
		case f.Kind == gpuscenario.FaultGPULost && f.Active(t), f.Kind == gpuscenario.FaultXID && f.XID == xidFallenOffBus && t >= f.At:
			return t, nvml.ERROR_GPU_IS_LOST
		case f.Kind == gpuscenario.FaultResetRequired && f.Active(t):
			ret = nvml.ERROR_RESET_REQUIRED
		}
	}
	return t, ret
}

// fault returns the latest state fault of a kind in force at t.
func (d *Device) fault(kind string, t time.Duration) *gpuscenario.Fault {
	var found *gpuscenario.Fault
	for _, f := range d.faults {
		if f.Kind == kind && f.Active(t) {
			found = f
		}
	}
	return found
}

// util is the percent of time a kernel ran at t, as NVML's utilization says: the utilization
// signal, and the time the GPU spins waiting in a collective, which fills its idle time too
// (NCCL's kernels run until their peers arrive).
func (d *Device) util(t time.Duration) uint32 {
	u := clamp(d.utilization.At(t), 100)
	return uint32(math.Round(u + d.collectiveWait(t)*(100-u)))
}

// collectiveWait is the share of its busy time the GPU spends waiting in a collective at t.
func (d *Device) collectiveWait(t time.Duration) float64 {
	if f := d.fault(gpuscenario.FaultCollectiveWait, t); f != nil {
		return f.Share
	}
	return 0
}

// work is the percent of time the GPU works at t, rounded as NVML's readings are: its
// utilization signal less the time it waits in a collective. Its memory controller, NVLink and
// PCIe traffic follow it.
func (d *Device) work(t time.Duration) float64 {
	return math.Round(clamp(d.utilization.At(t), 100) * (1 - d.collectiveWait(t)))
}

// load is what GPM measures the GPU busy with at t: its work (unrounded), or in MIG mode its
// instances' loads weighed by their shares of the GPU.
func (d *Device) load(t time.Duration) float64 {
	if len(d.migs) == 0 {
		return clamp(d.utilization.At(t), 100) * (1 - d.collectiveWait(t))
	}
	var sum float64
	for _, m := range d.migs {
		sum += m.share * m.load(t)
	}
	return sum
}

func (d *Device) activeProcesses(t time.Duration) []gpuscenario.Process {
	var active []gpuscenario.Process
	for _, p := range d.processes {
		if p.Active(t) && (!p.WhileRunning || d.srv.hostProcessRuns(p.PID)) {
			active = append(active, p)
		}
	}
	return active
}

// memoryInfo splits the framebuffer as NVML's v2 call does: used (the memory signal plus the
// processes), reserved by the driver, and free.
func (d *Device) memoryInfo(t time.Duration) (total, used, reserved, free uint64) {
	total = d.Config.MemoryMB << 20
	reserved = reservedMiB << 20
	used = uint64(clamp(d.memory.At(t), 100) / 100 * float64(total))
	for _, p := range d.activeProcesses(t) {
		used += p.MemoryMiB << 20
	}
	used = min(used, total-reserved)
	return total, used, reserved, total - reserved - used
}

func (d *Device) thermalSlowdown(t time.Duration) bool {
	return d.fault(gpuscenario.FaultThermalSlowdown, t) != nil
}

// GetPciInfo reports the simulated bus id, which the kernel log's XID lines refer to.
func (d *Device) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	_, ret := d.check()
	return d.pci, ret
}

// GetUtilizationRates follows the utilization signal; memory controller activity tracks the
// work (half of it), not the time spent waiting in a collective. Like NVML, a GPU in MIG mode
// has none.
func (d *Device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	t, ret := d.check()
	if ret == nvml.SUCCESS && len(d.migs) > 0 {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.Utilization{Gpu: d.util(t), Memory: uint32(d.work(t)) / 2}, ret
}

// GetMemoryInfo is the framebuffer use of the processes plus the memory signal; like NVML's v1
// call it counts the driver's reserved memory as used.
func (d *Device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	t, ret := d.check()
	total, used, reserved, free := d.memoryInfo(t)
	return nvml.Memory{Total: total, Used: used + reserved, Free: free}, ret
}

// GetMemoryInfo_v2 reports the driver's reserved memory apart from the used memory.
func (d *Device) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) { //nolint:revive // go-nvml's name (nvml.Device)
	t, ret := d.check()
	total, used, reserved, free := d.memoryInfo(t)
	return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: total, Reserved: reserved, Used: used, Free: free}, ret
}

func (d *Device) coreTemperature(t time.Duration) uint32 {
	return uint32(math.Round(clamp(d.temperature.At(t), 200)))
}

// GetTemperature follows the temperature signal.
func (d *Device) GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return) {
	t, ret := d.check()
	return d.coreTemperature(t), ret
}

// GetFieldValues answers the memory temperature (a few degrees above the core), the NVLink
// payload counters summed over all links (in KiB, growing with utilization) and the recovery
// action (the scenario's recovery_action fault in force, else none: the simulated driver is
// one that reports it, R565 or later, whatever version the mock server names); every other
// field, and NVLink on a GPU without it, answers NOT_SUPPORTED in its own return, as NVML does.
func (d *Device) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	t, ret := d.check()
	if ret != nvml.SUCCESS {
		return ret
	}
	if len(values) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	now := d.srv.clock.Now().UnixMicro()
	for i := range values {
		v := &values[i]
		v.Timestamp, v.NvmlReturn = now, uint32(nvml.SUCCESS)
		switch {
		case v.FieldId == nvml.FI_DEV_MEMORY_TEMP:
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.NativeEndian.PutUint32(v.Value[:], d.coreTemperature(t)+memoryAboveCore)
		case (v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX || v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX) && d.profile.nvLinks > 0:
			kib := d.nvlinkKiB.upTo(t, func(t time.Duration) float64 { return d.work(t) / 100 * nvlinkKiBPerSecond })
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			binary.NativeEndian.PutUint64(v.Value[:], uint64(kib))
		case v.FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION:
			action := recoveryaction.None
			if f := d.fault(gpuscenario.FaultRecoveryAction, t); f != nil {
				action = f.RecoveryAction()
			}
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.NativeEndian.PutUint32(v.Value[:], uint32(action))
		default:
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
	}
	return nvml.SUCCESS
}

// GetEncoderUtilization: a training node encodes no video. Like NVML, a GPU in MIG mode has
// no codec utilization.
func (d *Device) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	_, ret := d.check()
	if ret == nvml.SUCCESS && len(d.migs) > 0 {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return 0, nvmlSamplingPeriodUs, ret
}

// GetDecoderUtilization: the data loaders decode video on the GPU, a tenth of its utilization.
func (d *Device) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	t, ret := d.check()
	if ret == nvml.SUCCESS && len(d.migs) > 0 {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return d.util(t) / 10, nvmlSamplingPeriodUs, ret
}

// GetGridLicensableFeatures: bare-metal GPUs, without vGPU licensing.
func (d *Device) GetGridLicensableFeatures() (nvml.GridLicensableFeatures, nvml.Return) {
	_, ret := d.check()
	return nvml.GridLicensableFeatures{IsGridLicenseSupported: 0}, ret
}

// watts is the power signal at t; while the GPU waits in a collective, the waiting share of
// its draw above idle falls to spinPowerShare of it.
func (d *Device) watts(t time.Duration) float64 {
	w := clamp(d.power.At(t), 5000)
	if w > idlePower {
		w -= (w - idlePower) * d.collectiveWait(t) * (1 - spinPowerShare)
	}
	return w
}

// GetPowerUsage follows the power signal, in milliwatts.
func (d *Device) GetPowerUsage() (uint32, nvml.Return) {
	t, ret := d.check()
	return uint32(d.watts(t) * 1000), ret
}

// GetTotalEnergyConsumption integrates the power (trapezoids between readings), in mJ.
func (d *Device) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	t, ret := d.check()
	mj := d.energyMJ.upTo(t, func(t time.Duration) float64 { return d.watts(t) * 1000 })
	return uint64(mj), ret
}

// GetMaxClockInfo is the profile's highest clocks.
func (d *Device) GetMaxClockInfo(clock nvml.ClockType) (uint32, nvml.Return) {
	_, ret := d.check()
	switch clock {
	case nvml.CLOCK_SM:
		return d.profile.smClockMHz, ret
	case nvml.CLOCK_MEM:
		return d.profile.memClockMHz, ret
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

// GetPowerManagementLimitConstraints is the range the profile's power limit can be set in, in
// milliwatts.
func (d *Device) GetPowerManagementLimitConstraints() (uint32, uint32, nvml.Return) {
	_, ret := d.check()
	return d.profile.powerMinW * 1000, d.profile.powerMaxW * 1000, ret
}

// GetClockInfo: full SM clock under load, idle clock otherwise, halved by a thermal slowdown.
func (d *Device) GetClockInfo(clock nvml.ClockType) (uint32, nvml.Return) {
	t, ret := d.check()
	switch clock {
	case nvml.CLOCK_SM:
		mhz := uint32(idleSMClockMHz)
		if d.util(t) > 0 {
			mhz = d.profile.smClockMHz
		}
		if d.thermalSlowdown(t) {
			mhz /= 2
		}
		return mhz, ret
	case nvml.CLOCK_MEM:
		return d.profile.memClockMHz, ret
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

// GetPerformanceState is P0 under load and P8 at idle.
func (d *Device) GetPerformanceState() (nvml.Pstates, nvml.Return) {
	t, ret := d.check()
	if d.util(t) > 0 {
		return nvml.PSTATE_0, ret
	}
	return nvml.PSTATE_8, ret
}

// GetCurrentClocksEventReasons: idle without load, thermal slowdown during the fault.
func (d *Device) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	t, ret := d.check()
	var reasons uint64
	if d.util(t) == 0 {
		reasons |= nvml.ClocksEventReasonGpuIdle
	}
	if d.thermalSlowdown(t) {
		reasons |= nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown
	}
	return reasons, ret
}

// pcieKBPerSecond is the PCIe traffic of a GPU busy util percent of the time, in KB/s: 2 GB/s
// received at 100 %, half of it sent.
func pcieKBPerSecond(util float64, counter nvml.PcieUtilCounter) float64 {
	kbps := util * 20_000
	if counter == nvml.PCIE_UTIL_TX_BYTES {
		kbps /= 2
	}
	return kbps
}

// GetPcieThroughput grows with the work, in KB/s as NVML reports it.
func (d *Device) GetPcieThroughput(counter nvml.PcieUtilCounter) (uint32, nvml.Return) {
	t, ret := d.check()
	return uint32(pcieKBPerSecond(d.work(t), counter)), ret
}

// GetPcieReplayCounter: the simulated links never replay.
func (d *Device) GetPcieReplayCounter() (int, nvml.Return) {
	_, ret := d.check()
	return 0, ret
}

// GetCurrPcieLinkGeneration drops to Gen1 at idle as real GPUs do to save power, and to the
// fault's generation during a pcie_downgrade.
func (d *Device) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	t, ret := d.check()
	if f := d.fault(gpuscenario.FaultPCIeDowngrade, t); f != nil && f.Generation > 0 {
		return f.Generation, ret
	}
	if d.util(t) == 0 {
		return 1, ret
	}
	return d.profile.pcieGen, ret
}

// GetCurrPcieLinkWidth is x16, or the fault's width during a pcie_downgrade.
func (d *Device) GetCurrPcieLinkWidth() (int, nvml.Return) {
	t, ret := d.check()
	if f := d.fault(gpuscenario.FaultPCIeDowngrade, t); f != nil && f.Width > 0 {
		return f.Width, ret
	}
	return pcieWidth, ret
}

// GetMaxPcieLinkGeneration is the profile's PCIe generation.
func (d *Device) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	_, ret := d.check()
	return d.profile.pcieGen, ret
}

// GetMaxPcieLinkWidth is x16.
func (d *Device) GetMaxPcieLinkWidth() (int, nvml.Return) {
	_, ret := d.check()
	return pcieWidth, ret
}

// GetNvLinkState: every link of the profile is up but those an nvlink_down fault takes down.
func (d *Device) GetNvLinkState(link int) (nvml.EnableState, nvml.Return) {
	t, ret := d.check()
	if link < 0 || link >= d.profile.nvLinks {
		return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
	}
	for _, f := range d.faults {
		if f.Kind == gpuscenario.FaultNVLinkDown && f.Link == link && f.Active(t) {
			return nvml.FEATURE_DISABLED, ret
		}
	}
	return nvml.FEATURE_ENABLED, ret
}

// Fabric health masks: every check the driver reports healthy, or bandwidth degraded with the
// route in recovery.
const (
	fabricHealthy = nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
		nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
		nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
		nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
		nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION |
		nvml.GPU_FABRIC_HEALTH_MASK_GFM_STATE_CONNECTED<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE
	fabricDegraded = fabricHealthy&^
		(nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW|
			nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY) |
		nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
		nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY
)

// GetGpuFabricInfo_v4: on a profile with an NVSwitch fabric the GPU is registered, healthy;
// a fabric_down fault leaves it unregistered (the fabric manager is not running: registration
// not started, fabric manager disconnected), a fabric_degraded one degrades its bandwidth.
func (d *Device) GetGpuFabricInfo_v4() (nvml.GpuFabricInfo_v4, nvml.Return) { //nolint:revive // go-nvml's name (nvml.Device)
	t, ret := d.check()
	if !d.profile.fabric {
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_NOT_SUPPORTED
	}
	info := nvml.GpuFabricInfo_v4{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.SUCCESS), HealthMask: fabricHealthy, HealthSummary: nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY}
	switch {
	case d.fault(gpuscenario.FaultFabricDown, t) != nil:
		info.State = nvml.GPU_FABRIC_STATE_NOT_STARTED
		info.HealthMask = fabricHealthy&^(nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_GFM_STATE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE) |
			nvml.GPU_FABRIC_HEALTH_MASK_GFM_STATE_DISCONNECTED<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE
		info.HealthSummary = nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY
	case d.fault(gpuscenario.FaultFabricDegraded, t) != nil:
		info.HealthMask = fabricDegraded
		info.HealthSummary = nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
	}
	return info, ret
}

// GetGpuFabricInfo is the v1 call of older drivers: the same, without the health mask.
func (d *Device) GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return) {
	v4, ret := d.GetGpuFabricInfo_v4()
	return nvml.GpuFabricInfo{ClusterUuid: v4.ClusterUuid, Status: v4.Status, State: v4.State}, ret
}

// GetNvLinkErrorCounter: the simulated links have no errors.
func (d *Device) GetNvLinkErrorCounter(link int, _ nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	_, ret := d.check()
	if link < 0 || link >= d.profile.nvLinks {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return 0, ret
}

// eccErrors sums the ecc faults up to t; the simulated driver never reloads, so volatile and
// aggregate counts are equal.
func (d *Device) eccErrors(t time.Duration) (corrected, uncorrected uint64) {
	for _, f := range d.faults {
		if f.Kind == gpuscenario.FaultECC && t >= f.At {
			corrected += f.Corrected
			uncorrected += f.Uncorrected
		}
	}
	return corrected, uncorrected
}

// GetTotalEccErrors reports the ecc faults so far.
func (d *Device) GetTotalEccErrors(typ nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
	t, ret := d.check()
	corrected, uncorrected := d.eccErrors(t)
	if typ == nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
		return uncorrected, ret
	}
	return corrected, ret
}

// GetRemappedRows: every uncorrected ECC error remaps a row; the row-remap faults set the
// pending and failed flags.
func (d *Device) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	t, ret := d.check()
	_, uncorrected := d.eccErrors(t)
	pending := d.fault(gpuscenario.FaultRowRemapPending, t) != nil
	failed := d.fault(gpuscenario.FaultRowRemapFailed, t) != nil
	return 0, int(uncorrected), pending, failed, ret
}

// GetRetiredPages: the simulated GPUs are Ampere or later, which remap rows instead.
func (*Device) GetRetiredPages(nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	return nil, nvml.ERROR_NOT_SUPPORTED
}

// GetComputeRunningProcesses lists the scenario's processes running now on this GPU.
func (d *Device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	t, ret := d.check()
	var infos []nvml.ProcessInfo
	for _, p := range d.activeProcesses(t) {
		infos = append(infos, nvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.MemoryMiB << 20, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
	}
	return infos, ret
}

// GetGraphicsRunningProcesses: no graphics work on a compute node.
func (d *Device) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	_, ret := d.check()
	return nil, ret
}

// GetProcessUtilization samples the running processes' SM use; like NVML it answers
// ERROR_NOT_FOUND when there is no sample.
func (d *Device) GetProcessUtilization(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	t, ret := d.check()
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if len(d.migs) > 0 {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	ts := uint64(d.srv.clock.Now().UnixMicro())
	var samples []nvml.ProcessUtilizationSample
	for _, p := range d.activeProcesses(t) {
		samples = append(samples, nvml.ProcessUtilizationSample{Pid: p.PID, TimeStamp: ts, SmUtil: p.SM})
	}
	if len(samples) == 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return samples, nvml.SUCCESS
}

// GetSupportedEventTypes: XID, ECC and recovery action events.
func (d *Device) GetSupportedEventTypes() (uint64, nvml.Return) {
	_, ret := d.check()
	return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeGpuRecoveryAction, ret
}

// RegisterEvents adds this GPU to a simulated event set.
func (d *Device) RegisterEvents(mask uint64, set nvml.EventSet) nvml.Return {
	es, ok := set.(*eventSet)
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	es.register(d, mask)
	return nvml.SUCCESS
}

// GetMigMode is enabled (current and pending) on a GPU the scenario splits.
func (d *Device) GetMigMode() (int, int, nvml.Return) {
	_, ret := d.check()
	if len(d.migs) > 0 {
		return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, ret
	}
	return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, ret
}

// GetMaxMigDeviceCount is seven slots, as on A100, H100, H200 and B200.
func (d *Device) GetMaxMigDeviceCount() (int, nvml.Return) {
	_, ret := d.check()
	return gpuscenario.MaxMIGInstances, ret
}

// GetMigDeviceHandleByIndex answers ERROR_NOT_FOUND for an empty slot, as NVML does.
func (d *Device) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	_, ret := d.check()
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if i < 0 || i >= len(d.migs) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return d.migs[i], nvml.SUCCESS
}

// MIGDevice is one MIG instance; it fails as its parent GPU fails. The embedded mock covers the
// rest of nvml.Device.
type MIGDevice struct {
	mock.Device
	parent       *Device
	uuid         string
	gi           int
	memory, used uint64
	// share is its part of the GPU; a busy instance runs at the GPU's utilization signal.
	share float64
	busy  bool
	// gpm is what a GPM sample of the instance reads.
	gpm gpmTarget
}

// load is the percent of time the instance is busy at t.
func (m *MIGDevice) load(t time.Duration) float64 {
	if !m.busy {
		return 0
	}
	return clamp(m.parent.utilization.At(t), 100)
}

// GetUUID is the instance's MIG-… UUID.
func (m *MIGDevice) GetUUID() (string, nvml.Return) {
	_, ret := m.parent.check()
	return m.uuid, ret
}

// GetGpuInstanceId is the instance's GPU instance.
func (m *MIGDevice) GetGpuInstanceId() (int, nvml.Return) { //nolint:revive // go-nvml's name (nvml.Device)
	_, ret := m.parent.check()
	return m.gi, ret
}

// GetComputeInstanceId is 0: one compute instance per GPU instance.
func (m *MIGDevice) GetComputeInstanceId() (int, nvml.Return) { //nolint:revive // go-nvml's name (nvml.Device)
	_, ret := m.parent.check()
	return 0, ret
}

// GetMemoryInfo is the instance's slice of the framebuffer.
func (m *MIGDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	_, ret := m.parent.check()
	return nvml.Memory{Total: m.memory, Used: m.used, Free: m.memory - m.used}, ret
}

// clamp is v within [0, hi]: a signal may wander past what a GPU can report.
func clamp(v, hi float64) float64 {
	return math.Min(hi, math.Max(0, v))
}

// xidFallenOffBus is the XID a GPU reports when it drops off the PCIe bus; NVML then answers
// ERROR_GPU_IS_LOST for it, so the simulation does the same.
const xidFallenOffBus = 79
