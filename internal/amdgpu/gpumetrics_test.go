// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUMetricsLayouts holds each layout to the C struct's size and to the offsets of its
// fields, worked out by hand from kgd_pp_interface.h (natural alignment) at the commits
// gpumetrics.go names: the reader's offsets for the fields it reads, and the landmarks where a
// transcription slip would shift everything after it (the arrays, the padding, the last field).
func TestGPUMetricsLayouts(t *testing.T) {
	for _, want := range []struct {
		rev     Revision
		size    int
		offsets map[string]int
	}{
		{Revision{1, 1}, 96, map[string]int{
			"temperature_edge": 4, "average_gfx_activity": 16, "average_socket_power": 22, "energy_accumulator": 24,
			"current_gfxclk": 54, "current_uclk": 58, "throttle_status": 68, "gfx_activity_acc": 80, "temperature_hbm": 88,
		}},
		{Revision{1, 2}, 104, map[string]int{"temperature_hbm": 88, "firmware_timestamp": 96}},
		{Revision{1, 3}, 120, map[string]int{"firmware_timestamp": 96, "voltage_soc": 104, "padding1": 110, "indep_throttle_status": 112}},
		{Revision{1, 4}, 288, map[string]int{
			"temperature_hotspot": 4, "temperature_mem": 6, "curr_socket_power": 10, "average_gfx_activity": 12,
			"average_umc_activity": 14, "vcn_activity": 16, "energy_accumulator": 24, "throttle_status": 40,
			"pcie_bandwidth_acc": 64, "xgmi_read_data_acc": 104, "firmware_timestamp": 232, "current_gfxclk": 240,
			"current_uclk": 280, "padding": 282,
		}},
		{Revision{1, 5}, 360, map[string]int{
			"jpeg_activity": 24, "energy_accumulator": 88, "throttle_status": 104, "pcie_nak_sent_count_acc": 168,
			"xgmi_read_data_acc": 176, "firmware_timestamp": 304, "current_uclk": 352,
		}},
		{Revision{1, 6}, 1664, map[string]int{
			"energy_accumulator": 16, "accumulation_counter": 32, "ppt_residency_acc": 40, "hbm_thm_residency_acc": 52,
			"gfxclk_lock_status": 56, "pcie_bandwidth_acc": 80, "xgmi_read_data_acc": 128, "firmware_timestamp": 256,
			"current_gfxclk": 264, "current_uclk": 304, "num_partition": 306, "xcp_stats": 312,
			"pcie_lc_perf_other_end_recovery": 1656,
		}},
		{Revision{1, 7}, 2208, map[string]int{
			"mem_max_bandwidth": 16, "energy_accumulator": 24, "accumulation_counter": 40, "xgmi_link_status": 264,
			"padding": 280, "firmware_timestamp": 288, "current_uclk": 336, "num_partition": 338, "xcp_stats": 344,
			"pcie_lc_perf_other_end_recovery": 2200,
		}},
		// The v1_8 the fixtures wrote before had 376-byte partition stats (four u64[8], not five):
		// 3,360 bytes, a size no kernel produces, and pcie_lc_perf_other_end_recovery at 3352.
		{Revision{1, 8}, 3872, map[string]int{
			"mem_max_bandwidth": 16, "energy_accumulator": 24, "accumulation_counter": 40, "xgmi_link_status": 264,
			"firmware_timestamp": 288, "current_uclk": 336, "num_partition": 338, "xcp_stats": 344,
			"pcie_lc_perf_other_end_recovery": 3864,
		}},
	} {
		l := builtLayouts[want.rev]
		assert.Equal(t, want.size, l.size, "%s size", want.rev)
		assert.Equal(t, want.size, StructureSize(want.rev), want.rev.String())
		for name, off := range want.offsets {
			got, ok := l.offsets[name]
			if assert.True(t, ok, "%s has %s", want.rev, name) {
				assert.Equal(t, off, got, "%s %s offset", want.rev, name)
			}
		}
	}
	assert.Len(t, KnownRevisions(), 8)
	assert.Zero(t, StructureSize(Revision{2, 1}))
}

// TestParseGPUMetricsByHand builds blobs byte by byte, without the encoder, at the offsets the
// C structs have.
func TestParseGPUMetricsByHand(t *testing.T) {
	// v1_3 (MI200): energy_accumulator at 24, indep_throttle_status at 112.
	b := make([]byte, 120)
	for i := range b {
		b[i] = 0xFF
	}
	binary.LittleEndian.PutUint16(b[0:], 120)
	b[2], b[3] = 1, 3
	binary.LittleEndian.PutUint16(b[4:], 41)  // temperature_edge
	binary.LittleEndian.PutUint16(b[16:], 77) // average_gfx_activity
	binary.LittleEndian.PutUint64(b[24:], 3<<16)
	binary.LittleEndian.PutUint64(b[112:], 1<<36)
	m, err := ParseGPUMetrics(b)
	require.NoError(t, err)
	assert.InDelta(t, 41.0, *m.EdgeCelsius, 0)
	assert.InDelta(t, 77.0, *m.GfxActivity, 0)
	j, ok := m.EnergyJoules()
	assert.True(t, ok)
	assert.InDelta(t, 3.0, j, 1e-9)
	assert.Equal(t, uint64(1<<36), *m.IndepThrottleStatus)
	assert.Nil(t, m.HotspotCelsius, "0xFFFF: the firmware did not fill it")
	assert.Nil(t, m.ThrottleStatus)
	assert.Nil(t, m.Residency)

	// v1_7 (MI300 on current kernels): hotspot at 4, mem_max_bandwidth at 16, energy at 24,
	// the residency counters from 40.
	b = make([]byte, 2208)
	binary.LittleEndian.PutUint16(b[0:], 2208)
	b[2], b[3] = 1, 7
	binary.LittleEndian.PutUint16(b[4:], 55)
	binary.LittleEndian.PutUint64(b[24:], 1<<16)
	binary.LittleEndian.PutUint32(b[40:], 500) // accumulation_counter
	binary.LittleEndian.PutUint32(b[48:], 9)   // ppt_residency_acc
	m, err = ParseGPUMetrics(b)
	require.NoError(t, err)
	assert.InDelta(t, 55.0, *m.HotspotCelsius, 0)
	assert.Nil(t, m.EdgeCelsius, "no edge sensor from v1_4 on")
	j, _ = m.EnergyJoules()
	assert.InDelta(t, 1.0, j, 1e-9)
	require.NotNil(t, m.Residency)
	assert.Equal(t, ThrottleResidency{AccumulationCounter: 500, PPT: 9}, *m.Residency)
}

func TestGPUMetricsRoundTrip(t *testing.T) {
	for _, rev := range KnownRevisions() {
		values := map[string]uint64{"average_gfx_activity": 42, "energy_accumulator": 7 << 16, "temperature_mem": 61}
		if rev.Content <= 5 {
			values["throttle_status"] = 3
		}
		b, err := EncodeGPUMetrics(rev, values)
		require.NoError(t, err)
		m, err := ParseGPUMetrics(append(b, 0, 0, 0))
		require.NoError(t, err, "%s: bytes after the struct are ignored", rev)
		assert.Equal(t, rev, m.Revision)
		assert.InDelta(t, 42.0, *m.GfxActivity, 0, rev.String())
		assert.InDelta(t, 61.0, *m.MemCelsius, 0, rev.String())
		if rev.Content <= 5 {
			assert.Equal(t, uint32(3), *m.ThrottleStatus, rev.String())
		} else {
			assert.Nil(t, m.ThrottleStatus, "%s has residency counters instead", rev)
		}
		j, _ := m.EnergyJoules()
		assert.InDelta(t, 7.0, j, 1e-9, rev.String())
	}
	_, err := EncodeGPUMetrics(Revision{1, 4}, map[string]uint64{"temperature_edge": 1})
	assert.Error(t, err, "v1_4 has no edge temperature")
}

func TestParseGPUMetricsErrors(t *testing.T) {
	_, err := ParseGPUMetrics([]byte{1, 2})
	assert.Error(t, err)
	b, err := EncodeGPUMetrics(Revision{1, 5}, nil)
	require.NoError(t, err)
	b[3] = 9
	_, err = ParseGPUMetrics(b)
	require.ErrorIs(t, err, ErrUnknownRevision)
	b[3] = 5
	_, err = ParseGPUMetrics(b[:200])
	require.Error(t, err, "shorter than its struct")
	binary.LittleEndian.PutUint16(b, 100)
	_, err = ParseGPUMetrics(b)
	require.Error(t, err, "structure_size smaller than the revision's struct")
}
