// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUMetricsSizes holds the layouts to the C structs' sizes, worked out by hand from
// kgd_pp_interface.h with natural alignment.
func TestGPUMetricsSizes(t *testing.T) {
	for rev, size := range map[Revision]int{{1, 1}: 96, {1, 2}: 104, {1, 3}: 120, {1, 4}: 288, {1, 5}: 360, {1, 6}: 1664, {1, 7}: 2208, {1, 8}: 3360} {
		assert.Equal(t, size, StructureSize(rev), rev.String())
	}
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
