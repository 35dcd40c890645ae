// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"

// Throttle is why the firmware holds the clocks down, in the three classes the receiver reports
// (gpu_clock_event_reason's power_cap, sw_thermal and hw_slowdown): a power or current limit, a
// temperature limit the firmware enforces, or a hardware signal (PROCHOT, a voltage regulator
// hot or at its limit).
type Throttle struct {
	PowerCap, Thermal, HWSlowdown bool
}

// The ASIC-independent throttler bits (amdgpu_smu.h, SMU_THROTTLER_*_BIT), which v1_3's
// indep_throttle_status carries (MI200: aldebaran_ppt.c maps its firmware's bits onto them).
var indepThrottleClasses = []struct {
	first, last int
	class       func(*Throttle)
}{
	{0, 7, func(t *Throttle) { t.PowerCap = true }},     // PPT0-3, SPL, FPPT, SPPT, SPPT_APU
	{16, 23, func(t *Throttle) { t.PowerCap = true }},   // TDC_GFX/SOC/MEM/VDD/CVIP, EDC_CPU/GFX, APCC: current limits
	{32, 37, func(t *Throttle) { t.Thermal = true }},    // TEMP_GPU, CORE, MEM, EDGE, HOTSPOT, SOC
	{38, 41, func(t *Throttle) { t.HWSlowdown = true }}, // TEMP_VR_GFX, VR_SOC, VR_MEM0, VR_MEM1
	{42, 43, func(t *Throttle) { t.Thermal = true }},    // TEMP_LIQUID0-1
	{44, 47, func(t *Throttle) { t.HWSlowdown = true }}, // VRHOT0-1, PROCHOT_CPU, PROCHOT_GFX
}

// ThrottleFromIndep classes an indep_throttle_status mask. PPM and FIT (bits 56, 57) are no
// throttling of the three classes and are left out.
func ThrottleFromIndep(mask uint64) Throttle {
	var t Throttle
	for _, c := range indepThrottleClasses {
		for bit := c.first; bit <= c.last; bit++ {
			if mask&(1<<bit) != 0 {
				c.class(&t)
			}
		}
	}
	return t
}

// The MI300 firmware's throttler bits (smu13_driver_if_v13_0_6.h, THROTTLER_*_BIT), which
// smu_v13_0_6 writes unmapped into v1_4 and v1_5's throttle_status.
const (
	mi300ProchotBit       = 0
	mi300PPTBit           = 1
	mi300ThermalSocketBit = 2
	mi300ThermalVRBit     = 3
	mi300ThermalHBMBit    = 4
)

// ThrottleFromMI300 classes an MI300 throttle_status (gpu_metrics v1_4, v1_5).
func ThrottleFromMI300(status uint32) Throttle {
	bit := func(n int) bool { return status&(1<<n) != 0 }
	return Throttle{
		PowerCap:   bit(mi300PPTBit),
		Thermal:    bit(mi300ThermalSocketBit) || bit(mi300ThermalHBMBit),
		HWSlowdown: bit(mi300ProchotBit) || bit(mi300ThermalVRBit),
	}
}

// ThrottleFromResidency classes the v1_6 residency counters by which of them grew between two
// readings: a limiter that throttled at any time in between. Counters that went back (a driver
// reload or reset) say nothing, and the reading is reported as not known.
func ThrottleFromResidency(prev, cur ThrottleResidency) (Throttle, bool) {
	if cur.AccumulationCounter < prev.AccumulationCounter {
		return Throttle{}, false
	}
	grew := func(p, c uint32) bool { return c > p }
	return Throttle{
		PowerCap:   grew(prev.PPT, cur.PPT),
		Thermal:    grew(prev.SocketThermal, cur.SocketThermal) || grew(prev.HBMThermal, cur.HBMThermal),
		HWSlowdown: grew(prev.Prochot, cur.Prochot) || grew(prev.VRThermal, cur.VRThermal),
	}, true
}
