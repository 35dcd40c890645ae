// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRAS(t *testing.T) {
	c, err := ParseRAS("ue: 1\nce: 23\n")
	require.NoError(t, err)
	assert.Equal(t, ErrcountRAS{Uncorrected: 1, Corrected: 23}, c)

	c, err = ParseRAS("ue: 0\nce: 4\nde: 2\n")
	require.NoError(t, err, "the deferred count of newer kernels is skipped")
	assert.Equal(t, ErrcountRAS{Corrected: 4}, c)

	// What amdgpu_ras_sysfs_read writes while the GPU is in reset: a state, told apart.
	_, err = ParseRAS("Query currently inaccessible\n")
	require.ErrorIs(t, err, ErrRASQueryInaccessible)
	_, err = ParseRAS("ue: 1\nQuery currently inaccessible\n")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRASQueryInaccessible)

	for _, bad := range []string{"", "ue: 1\n", "ue: x\nce: 0\n", "ue 1\nce 0\n", "ue: -1\nce: 0\n", strings.Repeat("ce: 1\n", maxLines+1)} {
		_, err := ParseRAS(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseDPM(t *testing.T) {
	d, err := ParseDPM("0: 500Mhz\n1: 1420Mhz *\n2: 2100Mhz\n")
	require.NoError(t, err)
	cur, ok := d.CurrentMHz()
	assert.True(t, ok)
	assert.Equal(t, uint64(1420), cur)
	top, _ := d.MaxMHz()
	assert.Equal(t, uint64(2100), top)

	d, err = ParseDPM("S: 19Mhz *\n0: 500Mhz\n1: 1700Mhz\n")
	require.NoError(t, err, "a deep-sleep level")
	cur, _ = d.CurrentMHz()
	assert.Equal(t, uint64(19), cur)

	d, err = ParseDPM("0: 400Mhz\n1: 1600Mhz\n")
	require.NoError(t, err)
	_, ok = d.CurrentMHz()
	assert.False(t, ok, "no level marked")

	for _, bad := range []string{"", "0: fast\n", "0 500Mhz\n", "0: 500GHz\n", "0: -5Mhz\n"} {
		_, err := ParseDPM(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseLinkSpeed(t *testing.T) {
	for in, gen := range map[string]int{"2.5 GT/s PCIe": 1, "5.0 GT/s PCIe": 2, "8.0 GT/s PCIe": 3, "8 GT/s": 3, "16.0 GT/s PCIe\n": 4, "32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6} {
		got, err := ParseLinkSpeed(in)
		require.NoError(t, err, in)
		assert.Equal(t, gen, got, in)
	}
	for _, bad := range []string{"Unknown", "", "12.0 GT/s PCIe", "fast GT/s", "-8 GT/s", "NaN GT/s"} {
		_, err := ParseLinkSpeed(bad)
		assert.Error(t, err, "%q", bad)
	}
	w, err := ParseLinkWidth("16\n")
	require.NoError(t, err)
	assert.Equal(t, 16, w)
	for _, bad := range []string{"0", "x16", "64", ""} {
		_, err := ParseLinkWidth(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseKFDProperties(t *testing.T) {
	// An MI300 node's properties as the KFD prints them (kfd_topology.c node_show).
	p, err := ParseKFDProperties("cpu_cores_count 0\nsimd_count 912\nvendor_id 4098\ndevice_id 29856\nlocation_id 49408\ndomain 0\ndrm_render_minor 136\nhive_id 9034655720432782706\nunique_id 11940228331418201223\nnum_xcc 6\n")
	require.NoError(t, err)
	assert.Equal(t, KFDProperties{LocationID: 0xc100, DRMRenderMinor: 136, UniqueID: 11940228331418201223, SIMDCount: 912, DeviceID: 0x74a0}, p)

	// The reverted partition numbering put node_id in bits 31:28: read, not rejected.
	p, err = ParseKFDProperties("location_id 268438016\ndomain 65536\ndrm_render_minor 129\n")
	require.NoError(t, err)
	assert.Equal(t, uint32(1<<28|0x0a00), p.LocationID)
	assert.Equal(t, uint32(0x10000), p.Domain)

	// A kernel that prints no domain (testdata/kfd/vega10-no-domain, a real capture): domain 0.
	b, err := os.ReadFile(filepath.Join("testdata", "kfd", "vega10-no-domain", "nodes", "1", "properties"))
	require.NoError(t, err)
	p, err = ParseKFDProperties(string(b))
	require.NoError(t, err)
	assert.Equal(t, KFDProperties{LocationID: 0x1900, DRMRenderMinor: 128, UniqueID: 14073402507705256556, SIMDCount: 256, DeviceID: 0x6860}, p)

	for _, bad := range []string{"", "location_id 1\ndomain 0\n", "location_id x\ndomain 0\ndrm_render_minor 128\n", "location_id 4294967296\ndomain 0\ndrm_render_minor 128\n", "location_id\n"} {
		_, err := ParseKFDProperties(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParsePCIAddress(t *testing.T) {
	domain, devID, err := ParsePCIAddress("0002:05:1f.7")
	require.NoError(t, err)
	assert.Equal(t, uint32(2), domain)
	assert.Equal(t, uint32(5<<8|0x1f<<3|7), devID)
	for _, bad := range []string{"", "0000:0a:00", "0000:0a:20.0", "0000:0a:00.8", "0000:100:00.0", "x:0a:00.0"} {
		_, _, err := ParsePCIAddress(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseUniqueID(t *testing.T) {
	id, err := ParseUniqueID("4b7a3c1e9d2f0500\n")
	require.NoError(t, err)
	assert.Equal(t, uint64(0x4b7a3c1e9d2f0500), id)
	id, err = ParseUniqueID("0x1f")
	require.NoError(t, err)
	assert.Equal(t, uint64(0x1f), id)
	for _, bad := range []string{"", "zz", "11112222333344445", "0x"} {
		_, err := ParseUniqueID(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseUevent(t *testing.T) {
	ev, err := ParseUevent("DRIVER=amdgpu\nPCI_ID=1002:74A1\nPCI_SLOT_NAME=0000:C1:00.0\n")
	require.NoError(t, err)
	assert.Equal(t, "amdgpu", ev["DRIVER"])
	_, err = ParseUevent("DRIVER\n")
	assert.Error(t, err)
}

// writeHwmon lays out a hwmon directory of files by name.
func writeHwmon(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dev := tb.TempDir()
	dir := filepath.Join(dev, "hwmon", "hwmon3")
	require.NoError(tb, os.MkdirAll(dir, 0o755))
	for name, content := range files {
		require.NoError(tb, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	return dev
}

func TestReadGPUHwmon(t *testing.T) {
	dev := writeHwmon(t, map[string]string{
		"temp1_label": "edge\n", "temp1_input": "36000\n",
		"temp2_label": "junction\n", "temp2_input": "-1500\n",
		"temp3_label": "mem\n", "temp3_input": "hot\n",
		"power1_input": "350000000\n", "power1_cap": "750000000\n",
		"freq1_label": "sclk\n", "freq1_input": "1420000000\n",
		"freq2_label": "mclk\n",
	})
	require.NoError(t, os.WriteFile(filepath.Join(dev, "current_link_speed"), []byte("Unknown\n"), 0o600))
	s := ReadGPU(dev)
	h := s.Hwmon
	assert.InDelta(t, 36.0, *h.EdgeCelsius, 1e-9)
	assert.InDelta(t, -1.5, *h.JunctionCelsius, 1e-9)
	assert.Nil(t, h.MemCelsius, "malformed")
	assert.InDelta(t, 350.0, *h.PowerWatts, 1e-9, "power1_input where there is no power1_average")
	assert.InDelta(t, 750.0, *h.PowerCapWatts, 1e-9)
	assert.Nil(t, h.PowerCapMaxWatts)
	assert.InDelta(t, 1420.0, *h.SclkMHz, 1e-9)
	assert.Nil(t, h.MclkMHz, "a label without its input")
	require.Len(t, s.Errors, 1)
	var re ReadError
	require.ErrorAs(t, s.Errors[0], &re)
	assert.Equal(t, SourceHwmon, re.Source)
	assert.Nil(t, s.BusyPercent, "missing files are no errors")
	assert.Nil(t, s.LinkGen, "a link speed the PCI core cannot tell is no reading, and no error")
}

func TestThrottle(t *testing.T) {
	assert.Equal(t, Throttle{PowerCap: true}, ThrottleFromIndep(1<<0|1<<18))
	assert.Equal(t, Throttle{Thermal: true}, ThrottleFromIndep(1<<36))
	assert.Equal(t, Throttle{HWSlowdown: true}, ThrottleFromIndep(1<<47|1<<38))
	assert.Equal(t, Throttle{}, ThrottleFromIndep(1<<56|1<<57), "PPM and FIT are none of the three")
	assert.Equal(t, Throttle{PowerCap: true, Thermal: true, HWSlowdown: true}, ThrottleFromMI300(0b11111))
	assert.Equal(t, Throttle{Thermal: true}, ThrottleFromMI300(1<<4))

	prev := ThrottleResidency{AccumulationCounter: 100, PPT: 5, HBMThermal: 2}
	got, ok := ThrottleFromResidency(prev, ThrottleResidency{AccumulationCounter: 200, PPT: 5, HBMThermal: 3, Prochot: 1})
	require.True(t, ok)
	assert.Equal(t, Throttle{Thermal: true, HWSlowdown: true}, got)
	_, ok = ThrottleFromResidency(prev, ThrottleResidency{AccumulationCounter: 10})
	assert.False(t, ok, "counters reset by a driver reload say nothing")
}
