// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadGPUCaptureRX7800XT reads a real device directory (testdata/sysfs/SOURCE.md). Its
// gpu_metrics v1_3 agrees with its hwmon files, which holds the layout's offsets to a real blob.
func TestReadGPUCaptureRX7800XT(t *testing.T) {
	s := ReadGPU(filepath.Join("testdata", "sysfs", "rx7800xt"))
	require.Empty(t, s.Errors)
	assert.InDelta(t, 2.0, *s.BusyPercent, 0)
	assert.Nil(t, s.UniqueID, "no unique_id file")
	assert.Equal(t, "747e", s.PCIDeviceID)
	assert.Equal(t, "AMD GPU 1002:747e", s.Model())
	assert.Equal(t, 4, *s.LinkGen)
	assert.Equal(t, 16, *s.LinkWidth)
	assert.Nil(t, s.LinkGenMax)
	assert.Equal(t, DPM{LevelsMHz: []uint64{500, 77, 2254}, Current: 1}, *s.Sclk, "the current sclk, 77 MHz, lies between levels")
	sclkMax, _ := s.Sclk.MaxMHz()
	assert.Equal(t, uint64(2254), sclkMax)
	assert.Equal(t, DPM{LevelsMHz: []uint64{96, 456, 772, 1218}, Current: 1}, *s.Mclk)
	assert.Equal(t, Hwmon{
		EdgeCelsius: new(24.0), JunctionCelsius: new(31.0), MemCelsius: new(48.0),
		PowerWatts: new(32.0), PowerCapWatts: new(236.0), PowerCapMinWatts: new(212.0), PowerCapMaxWatts: new(280.0),
		SclkMHz: new(2011.0), MclkMHz: new(456.0),
	}, s.Hwmon)

	m := s.Metrics
	require.NotNil(t, m)
	assert.Equal(t, Revision{1, 3}, m.Revision)
	assert.Equal(t, s.Hwmon.EdgeCelsius, m.EdgeCelsius)
	assert.Equal(t, s.Hwmon.JunctionCelsius, m.HotspotCelsius)
	assert.Equal(t, s.Hwmon.MemCelsius, m.MemCelsius)
	assert.Equal(t, s.Hwmon.PowerWatts, m.SocketPowerWatts)
	assert.Equal(t, s.Hwmon.SclkMHz, m.CurrentGfxClkMHz)
	assert.Equal(t, s.Hwmon.MclkMHz, m.CurrentUclkMHz)
	assert.InDelta(t, 24.0, *m.GfxActivity, 0)
	assert.Equal(t, uint64(0), *m.IndepThrottleStatus)
}

// TestReadGPUCapturePhoenix reads a real APU's directory: its empty unique_id is no reading
// and no error; its gpu_metrics v2_1 is a layout the reader does not read, the one error.
func TestReadGPUCapturePhoenix(t *testing.T) {
	s := ReadGPU(filepath.Join("testdata", "sysfs", "phoenix"))
	require.Len(t, s.Errors, 1)
	assert.ErrorIs(t, s.Errors[0], ErrUnknownRevision)
	assert.Nil(t, s.UniqueID)
	assert.Nil(t, s.Metrics)
	assert.Equal(t, uint64(4294967296), *s.VRAMTotal)
	assert.Equal(t, uint64(1272893440), *s.VRAMUsed)
	assert.Equal(t, 4, *s.LinkGenMax)
	assert.InDelta(t, 3.103, *s.Hwmon.PowerWatts, 1e-9, "power1_average before power1_input")
	assert.InDelta(t, 25.0, *s.Hwmon.EdgeCelsius, 0)
	assert.Nil(t, s.Hwmon.JunctionCelsius)
	cur, _ := s.Mclk.CurrentMHz()
	assert.Equal(t, uint64(400), cur)
}

// TestParseGPUMetricsCaptureRX6900XT parses a real v1_3 blob read as a whole page (4096
// bytes): the bytes after the struct are ignored.
func TestParseGPUMetricsCaptureRX6900XT(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sysfs", "rx6900xt", "gpu_metrics"))
	require.NoError(t, err)
	require.Len(t, b, 4096)
	m, err := ParseGPUMetrics(b)
	require.NoError(t, err)
	assert.Equal(t, Revision{1, 3}, m.Revision)
	assert.InDelta(t, 56.0, *m.EdgeCelsius, 0)
	assert.InDelta(t, 59.0, *m.HotspotCelsius, 0)
	assert.InDelta(t, 54.0, *m.MemCelsius, 0)
	assert.InDelta(t, 36.0, *m.SocketPowerWatts, 0)
	j, ok := m.EnergyJoules()
	assert.True(t, ok)
	assert.InDelta(t, 17691682.0/65536, j, 1e-9)
	assert.InDelta(t, 500.0, *m.CurrentGfxClkMHz, 0)
	assert.InDelta(t, 1000.0, *m.CurrentUclkMHz, 0)
	assert.Equal(t, uint32(0), *m.ThrottleStatus)
}
