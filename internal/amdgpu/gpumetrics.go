// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// gpu_metrics is a C struct the driver copies out as it is in memory (little-endian on every
// platform amdgpu runs on), its layout selected by the header's format and content revisions
// (kgd_pp_interface.h, struct gpu_metrics_v1_x). The layouts below list each struct's fields in
// order with their C types; offsets follow C's natural alignment, so each layout is written once
// and the parser and the fixture's encoder share it.

// field is one member of a gpu_metrics struct: its name in kgd_pp_interface.h, the size of one
// element in bytes (1, 2, 4 or 8) and the number of elements (arrays).
type field struct {
	name  string
	size  int
	count int
}

func u8(name string) field  { return field{name, 1, 1} }
func u16(name string) field { return field{name, 2, 1} }
func u32(name string) field { return field{name, 4, 1} }
func u64(name string) field { return field{name, 8, 1} }
func u16s(name string, n int) field {
	return field{name, 2, n}
}
func u64s(name string, n int) field { return field{name, 8, n} }

// Array sizes of kgd_pp_interface.h.
const (
	numHBMInstances = 4
	numXGMILinks    = 8
	maxGfxClks      = 8
	maxClks         = 4
	numVCN          = 4
	numJPEGEng      = 32
)

// Revision is a gpu_metrics header's format and content revision (v<format>_<content>).
type Revision struct{ Format, Content uint8 }

func (r Revision) String() string { return fmt.Sprintf("v%d_%d", r.Format, r.Content) }

var header = []field{u16("structure_size"), u8("format_revision"), u8("content_revision")}

// v1Discrete is gpu_metrics_v1_1 to v1_3 up to temperature_hbm (discrete GPUs before MI300:
// MI100, MI200); v1_2 and v1_3 add fields after it.
var v1Discrete = []field{
	u16("temperature_edge"), u16("temperature_hotspot"), u16("temperature_mem"),
	u16("temperature_vrgfx"), u16("temperature_vrsoc"), u16("temperature_vrmem"),
	u16("average_gfx_activity"), u16("average_umc_activity"), u16("average_mm_activity"),
	u16("average_socket_power"), u64("energy_accumulator"),
	u64("system_clock_counter"),
	u16("average_gfxclk_frequency"), u16("average_socclk_frequency"), u16("average_uclk_frequency"),
	u16("average_vclk0_frequency"), u16("average_dclk0_frequency"), u16("average_vclk1_frequency"), u16("average_dclk1_frequency"),
	u16("current_gfxclk"), u16("current_socclk"), u16("current_uclk"),
	u16("current_vclk0"), u16("current_dclk0"), u16("current_vclk1"), u16("current_dclk1"),
	u32("throttle_status"),
	u16("current_fan_speed"),
	u16("pcie_link_width"), u16("pcie_link_speed"),
	u16("padding"),
	u32("gfx_activity_acc"), u32("mem_activity_acc"),
	u16s("temperature_hbm", numHBMInstances),
}

// v1MI300 is gpu_metrics_v1_4 and v1_5 (MI300 series, the first kernels to drive it), which have no
// edge temperature; v1_5 adds jpeg_activity and the PCIe NAK counters.
func v1MI300(content uint8) []field {
	f := []field{
		u16("temperature_hotspot"), u16("temperature_mem"), u16("temperature_vrsoc"),
		u16("curr_socket_power"),
		u16("average_gfx_activity"), u16("average_umc_activity"), u16s("vcn_activity", numVCN),
	}
	if content >= 5 {
		f = append(f, u16s("jpeg_activity", numJPEGEng))
	}
	f = append(f, u64("energy_accumulator"), u64("system_clock_counter"),
		u32("throttle_status"), u32("gfxclk_lock_status"),
		u16("pcie_link_width"), u16("pcie_link_speed"),
		u16("xgmi_link_width"), u16("xgmi_link_speed"),
		u32("gfx_activity_acc"), u32("mem_activity_acc"),
		u64("pcie_bandwidth_acc"), u64("pcie_bandwidth_inst"),
		u64("pcie_l0_to_recov_count_acc"), u64("pcie_replay_count_acc"), u64("pcie_replay_rover_count_acc"))
	if content >= 5 {
		f = append(f, u32("pcie_nak_sent_count_acc"), u32("pcie_nak_rcvd_count_acc"))
	}
	return append(f,
		u64s("xgmi_read_data_acc", numXGMILinks), u64s("xgmi_write_data_acc", numXGMILinks),
		u64("firmware_timestamp"),
		u16s("current_gfxclk", maxGfxClks), u16s("current_socclk", maxClks),
		u16s("current_vclk0", maxClks), u16s("current_dclk0", maxClks), u16("current_uclk"),
		u16("padding"))
}

// xcpStatsWords is the size of the per-partition xcp_stats[NUM_XCP] array of v1_6 to v1_8 in
// 8-byte words (its elements are 8-byte aligned): 8 of struct amdgpu_xcp_metrics (168 bytes:
// u32 gfx_busy_inst[8], u16 jpeg_busy[32], u16 vcn_busy[4], u64 gfx_busy_acc[8]) in v1_6,
// amdgpu_xcp_metrics_v1_1 (232: one more u64[8], gfx_below_host_limit_acc) in v1_7, and
// amdgpu_xcp_metrics_v1_2 (440: u16 jpeg_busy[40] and five u64[8], gfx_busy_acc,
// gfx_below_host_limit_ppt_acc, _thm_acc, gfx_low_utilization_acc and
// gfx_below_host_limit_total_acc) in v1_8.
var xcpStatsWords = map[uint8]int{6: 8 * 168 / 8, 7: 8 * 232 / 8, 8: 8 * 440 / 8}

// v1Residency is gpu_metrics_v1_6 to v1_8 (MI300 series on later kernels, and its successors), which
// replace throttle_status with the throttler residency counters; v1_7 adds mem_max_bandwidth
// and the xGMI link status, v1_8 bigger partition stats. A first v1_6, with vcn_activity,
// jpeg_activity and throttle_status beside the residency counters, was merged and reverted
// before any release (mainline 64af3d3d66c7, "Revert drm/amd/pm: Add gpu_metrics_v1_6"); this
// is the v1_6 the kernel ships. v1_7 is checked field by field against the patch that added it
// ("Add new gpu_metrics_v1_7", amd-gfx, Asad Kamal; kgd_pp_interface.h ee8170cda1d7 ->
// a95935cc3d76), whose header also holds the shipped v1_6 (its context: amdgpu_xcp_metrics
// ending in gfx_busy_acc, v1_6 ending in pcie_lc_perf_other_end_recovery); the shipped v1_6's
// fields were read from a transcription of that header (libdrm-amdgpu-sys-rs's bindings).
// v1_8 is checked against the patch that added it ("drm/amd/pm: Add gpu_metrics_v1_8", amd-gfx,
// Message-ID <20250326081400.1305136-3-asad.kamal@amd.com>).
func v1Residency(content uint8) []field {
	f := []field{
		u16("temperature_hotspot"), u16("temperature_mem"), u16("temperature_vrsoc"),
		u16("curr_socket_power"),
		u16("average_gfx_activity"), u16("average_umc_activity"),
	}
	if content >= 7 {
		f = append(f, u64("mem_max_bandwidth"))
	}
	f = append(f, u64("energy_accumulator"), u64("system_clock_counter"),
		u32("accumulation_counter"),
		u32("prochot_residency_acc"), u32("ppt_residency_acc"), u32("socket_thm_residency_acc"),
		u32("vr_thm_residency_acc"), u32("hbm_thm_residency_acc"),
		u32("gfxclk_lock_status"),
		u16("pcie_link_width"), u16("pcie_link_speed"),
		u16("xgmi_link_width"), u16("xgmi_link_speed"),
		u32("gfx_activity_acc"), u32("mem_activity_acc"),
		u64("pcie_bandwidth_acc"), u64("pcie_bandwidth_inst"),
		u64("pcie_l0_to_recov_count_acc"), u64("pcie_replay_count_acc"), u64("pcie_replay_rover_count_acc"),
		u32("pcie_nak_sent_count_acc"), u32("pcie_nak_rcvd_count_acc"),
		u64s("xgmi_read_data_acc", numXGMILinks), u64s("xgmi_write_data_acc", numXGMILinks))
	if content >= 7 {
		f = append(f, u16s("xgmi_link_status", numXGMILinks), u16("padding"))
	}
	return append(f,
		u64("firmware_timestamp"),
		u16s("current_gfxclk", maxGfxClks), u16s("current_socclk", maxClks),
		u16s("current_vclk0", maxClks), u16s("current_dclk0", maxClks), u16("current_uclk"),
		u16("num_partition"),
		u64s("xcp_stats", xcpStatsWords[content]),
		u32("pcie_lc_perf_other_end_recovery"))
}

// layouts are the revisions read: format 1 (discrete GPUs), content 1 to 8. v1_0 is not
// naturally aligned and was only written by Vega 20 and Arcturus drivers of 2020; format 2
// and 3 are APUs. Where each layout was checked, field by field (TestGPUMetricsLayouts holds
// the sizes and offsets): v1_1 to v1_3 against kgd_pp_interface.h at torvalds/linux
// 123db17ddff007080d464e785689fb14f94cbc7a; v1_4 and v1_5 at torvalds/linux
// 00dedab07b52ca16107e82ce5ca7caaaedf6a417 (whose v1_6 is the reverted one); v1_6 to v1_8 as
// v1Residency says.
var layouts = map[Revision][]field{
	{1, 1}: v1Discrete,
	{1, 2}: append(append([]field{}, v1Discrete...), u64("firmware_timestamp")),
	{1, 3}: append(append([]field{}, v1Discrete...), u64("firmware_timestamp"),
		u16("voltage_soc"), u16("voltage_gfx"), u16("voltage_mem"), u16("padding1"),
		u64("indep_throttle_status")),
	{1, 4}: v1MI300(4),
	{1, 5}: v1MI300(5),
	{1, 6}: v1Residency(6),
	{1, 7}: v1Residency(7),
	{1, 8}: v1Residency(8),
}

// layout is a revision's fields with their offsets, and the struct's size.
type layout struct {
	offsets map[string]int
	fields  map[string]field
	size    int
}

func buildLayout(fields []field) layout {
	l := layout{offsets: map[string]int{}, fields: map[string]field{}}
	all := append(append([]field{}, header...), fields...)
	off, maxAlign := 0, 1
	for _, f := range all {
		off = alignUp(off, f.size)
		maxAlign = max(maxAlign, f.size)
		l.offsets[f.name] = off
		l.fields[f.name] = f
		off += f.size * f.count
	}
	l.size = alignUp(off, maxAlign)
	return l
}

func alignUp(off, align int) int { return (off + align - 1) / align * align }

var builtLayouts = func() map[Revision]layout {
	m := map[Revision]layout{}
	for rev, f := range layouts {
		m[rev] = buildLayout(f)
	}
	return m
}()

// KnownRevisions are the gpu_metrics revisions ParseGPUMetrics reads.
func KnownRevisions() []Revision {
	return []Revision{{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}}
}

// StructureSize is the size the driver writes in the header of a revision's struct; 0 for a
// revision not read.
func StructureSize(rev Revision) int { return builtLayouts[rev].size }

// ErrUnknownRevision is returned for a gpu_metrics whose revision has no known layout.
var ErrUnknownRevision = errors.New("unknown gpu_metrics revision")

// unsupported16 and unsupported32 are what the firmware writes into a field it does not fill
// (the driver initializes the struct with 0xFF bytes, smu_cmn_init_soft_gpu_metrics).
const (
	unsupported16 = 0xFFFF
	unsupported32 = 0xFFFFFFFF
	unsupported64 = 0xFFFFFFFFFFFFFFFF
)

// GPUMetrics is what the receiver uses of a gpu_metrics blob. A field the revision lacks or the
// firmware left unset (all bits 1) is nil.
type GPUMetrics struct {
	Revision Revision
	// Temperatures in °C: edge (absent from v1_4 on: MI300 has no edge sensor), hotspot
	// (junction) and memory (HBM).
	EdgeCelsius, HotspotCelsius, MemCelsius *float64
	// GfxActivity and UMCActivity are percentages.
	GfxActivity, UMCActivity *float64
	// SocketPowerWatts is average_socket_power (v1_1-v1_3) or curr_socket_power (v1_4+).
	SocketPowerWatts *float64
	// EnergyAccumulator counts in units of 15.259 µJ (2^-16 J); EnergyJoules converts.
	EnergyAccumulator *uint64
	// ThrottleStatus is the ASIC-dependent throttle_status (v1_1 to v1_5).
	ThrottleStatus *uint32
	// IndepThrottleStatus is the ASIC-independent SMU_THROTTLER_* mask (v1_3).
	IndepThrottleStatus *uint64
	// Residency holds the accumulated throttler residencies (v1_6 on), nil before.
	Residency *ThrottleResidency
	// CurrentGfxClkMHz and CurrentUclkMHz are the current clocks (first instance).
	CurrentGfxClkMHz, CurrentUclkMHz *float64
}

// ThrottleResidency is the v1_6 accumulated throttler residency counters: each grows while its
// limiter throttles the GPU, in accumulation cycles (AccumulationCounter grows each cycle).
type ThrottleResidency struct {
	AccumulationCounter, Prochot, PPT, SocketThermal, VRThermal, HBMThermal uint32
}

// EnergyJoules is the energy accumulator in joules.
func (m GPUMetrics) EnergyJoules() (float64, bool) {
	if m.EnergyAccumulator == nil {
		return 0, false
	}
	return float64(*m.EnergyAccumulator) / 65536, true
}

// ParseGPUMetrics reads a gpu_metrics blob. A blob shorter than its header, than the size the
// header claims or than its revision's struct is an error; so is a revision without a known
// layout (ErrUnknownRevision). Bytes beyond the struct are ignored.
func ParseGPUMetrics(b []byte) (GPUMetrics, error) {
	if len(b) < 4 {
		return GPUMetrics{}, fmt.Errorf("gpu_metrics: %d bytes, shorter than its header", len(b))
	}
	size := int(binary.LittleEndian.Uint16(b[0:2]))
	rev := Revision{b[2], b[3]}
	l, ok := builtLayouts[rev]
	if !ok {
		return GPUMetrics{Revision: rev}, fmt.Errorf("gpu_metrics %s: %w", rev, ErrUnknownRevision)
	}
	if size < l.size || len(b) < l.size {
		return GPUMetrics{Revision: rev}, fmt.Errorf("gpu_metrics %s: structure_size %d and %d bytes read, %d expected", rev, size, len(b), l.size)
	}
	d := decoder{b: b, l: l}
	m := GPUMetrics{Revision: rev}
	m.EdgeCelsius = d.u16f("temperature_edge")
	m.HotspotCelsius = d.u16f("temperature_hotspot")
	m.MemCelsius = d.u16f("temperature_mem")
	m.GfxActivity = d.u16f("average_gfx_activity")
	m.UMCActivity = d.u16f("average_umc_activity")
	if m.SocketPowerWatts = d.u16f("average_socket_power"); m.SocketPowerWatts == nil {
		m.SocketPowerWatts = d.u16f("curr_socket_power")
	}
	m.EnergyAccumulator = d.u64p("energy_accumulator")
	m.ThrottleStatus = d.u32p("throttle_status")
	m.IndepThrottleStatus = d.u64p("indep_throttle_status")
	m.CurrentGfxClkMHz = d.u16f("current_gfxclk")
	m.CurrentUclkMHz = d.u16f("current_uclk")
	if _, ok := l.offsets["accumulation_counter"]; ok {
		m.Residency = &ThrottleResidency{
			AccumulationCounter: d.u32("accumulation_counter"),
			Prochot:             d.u32("prochot_residency_acc"),
			PPT:                 d.u32("ppt_residency_acc"),
			SocketThermal:       d.u32("socket_thm_residency_acc"),
			VRThermal:           d.u32("vr_thm_residency_acc"),
			HBMThermal:          d.u32("hbm_thm_residency_acc"),
		}
	}
	return m, nil
}

// decoder reads the first element of a named field; a field the layout lacks or the firmware
// left unset reads as absent.
type decoder struct {
	b []byte
	l layout
}

func (d decoder) at(name string) ([]byte, bool) {
	off, ok := d.l.offsets[name]
	if !ok {
		return nil, false
	}
	return d.b[off : off+d.l.fields[name].size], true
}

func (d decoder) u16f(name string) *float64 {
	b, ok := d.at(name)
	if !ok {
		return nil
	}
	v := binary.LittleEndian.Uint16(b)
	if v == unsupported16 {
		return nil
	}
	f := float64(v)
	return &f
}

func (d decoder) u32(name string) uint32 {
	b, _ := d.at(name)
	return binary.LittleEndian.Uint32(b)
}

func (d decoder) u32p(name string) *uint32 {
	b, ok := d.at(name)
	if !ok {
		return nil
	}
	v := binary.LittleEndian.Uint32(b)
	if v == unsupported32 {
		return nil
	}
	return &v
}

func (d decoder) u64p(name string) *uint64 {
	b, ok := d.at(name)
	if !ok {
		return nil
	}
	v := binary.LittleEndian.Uint64(b)
	if v == unsupported64 {
		return nil
	}
	return &v
}

// EncodeGPUMetrics lays out a gpu_metrics blob of a known revision as the driver does: every
// byte 0xFF (unset) but the header and the fields given, by their kgd_pp_interface.h names
// (the first element of an array field). It is for fixtures and tests.
func EncodeGPUMetrics(rev Revision, values map[string]uint64) ([]byte, error) {
	l, ok := builtLayouts[rev]
	if !ok {
		return nil, fmt.Errorf("gpu_metrics %s: %w", rev, ErrUnknownRevision)
	}
	b := make([]byte, l.size)
	for i := range b {
		b[i] = 0xFF
	}
	binary.LittleEndian.PutUint16(b[0:2], uint16(l.size))
	b[2], b[3] = rev.Format, rev.Content
	for name, v := range values {
		off, ok := l.offsets[name]
		if !ok {
			return nil, fmt.Errorf("gpu_metrics %s has no field %s", rev, name)
		}
		switch l.fields[name].size {
		case 1:
			b[off] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(b[off:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b[off:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[off:], v)
		}
	}
	return b, nil
}
