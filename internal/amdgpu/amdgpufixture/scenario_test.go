// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

const demoScenario = "../../../distro/scenarios/mi300x-demo.yaml"

// player plays the scenario file at path.
func player(t *testing.T, path string) *Player {
	t.Helper()
	sc, err := gpuscenario.Load(path)
	require.NoError(t, err)
	p, err := NewPlayer(sc)
	require.NoError(t, err)
	return p
}

// read reads every device of the node under root, by PCI address.
func read(t *testing.T, root string) ([]amdgpu.Device, map[string]amdgpu.Snapshot) {
	t.Helper()
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	snaps := map[string]amdgpu.Snapshot{}
	for _, d := range devices {
		s := amdgpu.ReadGPU(d.DeviceDir)
		require.Empty(t, s.Errors, d.PCIAddress)
		snaps[d.PCIAddress] = s
	}
	return devices, snaps
}

// TestScenarioOverTime plays make demo-amd's scenario: the reader sees the load change and each
// fault on its GPU, and a lost GPU's files go while the others keep their places.
func TestScenarioOverTime(t *testing.T) {
	s := player(t, demoScenario)
	root := t.TempDir()
	pci := func(i int) string { return MI300XGPU(i, 0).PCIAddress }

	require.NoError(t, Write(root, s.Node(0)))
	devices, snaps := read(t, root)
	require.Len(t, devices, 8)
	assert.InDelta(t, 85.0, *snaps[pci(0)].BusyPercent, 0)
	assert.InDelta(t, 0.0, *snaps[pci(7)].BusyPercent, 0)
	assert.Equal(t, amdgpu.ErrcountRAS{}, snaps[pci(2)].RAS["umc"])
	assert.Equal(t, 16, *snaps[pci(5)].LinkWidth)
	vram, errs := amdgpu.Reader{Root: root}.ProcessVRAM()
	require.Empty(t, errs)
	assert.Equal(t, map[int]uint64{52001: 48000 << 20, 52002: 16000 << 20}, vram[devices[5].GPUID], "bob's and carol's on GPU 5")
	assert.Equal(t, map[int]uint64{81001: 0}, vram[devices[7].GPUID], "frank holds GPU 7 with nothing allocated")
	energy0, _ := snaps[pci(0)].Metrics.EnergyJoules()

	// Thermal throttle on GPU 0 from 2 min: its socket thermal residency grows between two
	// collections, GPU 1's does not.
	at := func(d time.Duration) map[string]amdgpu.Snapshot {
		require.NoError(t, Write(root, s.Node(d)))
		_, now := read(t, root)
		return now
	}
	before, after := at(2*time.Minute+10*time.Second), at(2*time.Minute+20*time.Second)
	throttle, ok := amdgpu.ThrottleFromResidency(*before[pci(0)].Metrics.Residency, *after[pci(0)].Metrics.Residency)
	require.True(t, ok)
	assert.Equal(t, amdgpu.Throttle{Thermal: true}, throttle)
	throttle, ok = amdgpu.ThrottleFromResidency(*before[pci(1)].Metrics.Residency, *after[pci(1)].Metrics.Residency)
	require.True(t, ok)
	assert.Equal(t, amdgpu.Throttle{}, throttle)
	assert.InDelta(t, 95.0, *after[pci(0)].BusyPercent, 0, "the load's step at 2 min")
	energy, _ := after[pci(0)].Metrics.EnergyJoules()
	assert.Greater(t, energy, energy0, "the energy counter grows")

	// After the last fault: GPU 2's RAS errors, GPU 5's link at x8, GPU 3 gone with its process.
	require.NoError(t, Write(root, s.Node(10*time.Minute)))
	devices, snaps = read(t, root)
	require.Len(t, devices, 7)
	assert.NotContains(t, snaps, pci(3))
	assert.Equal(t, amdgpu.ErrcountRAS{Corrected: 12, Uncorrected: 1}, snaps[pci(2)].RAS["umc"])
	assert.Equal(t, amdgpu.ErrcountRAS{}, snaps[pci(2)].RAS["gfx"])
	assert.Equal(t, 8, *snaps[pci(5)].LinkWidth)
	assert.Equal(t, 16, *snaps[pci(5)].LinkWidthMax)
	_, err := os.Stat(filepath.Join(root, "sys/class/kfd/kfd/proc/31004"))
	require.NoError(t, err, "the process directory stays: the process still runs")
	vram, errs = amdgpu.Reader{Root: root}.ProcessVRAM()
	require.Empty(t, errs)
	assert.Len(t, vram, 7, "no VRAM on the lost GPU")
}

// TestPlayerKnowsTheFormat: every limiter and PCIe generation the scenario format accepts has
// its counter and link speed here.
func TestPlayerKnowsTheFormat(t *testing.T) {
	assert.ElementsMatch(t, gpuscenario.Limiters, slices.Collect(maps.Keys(limiters)))
	assert.Len(t, linkSpeeds, gpuscenario.MaxPCIeGeneration)
}

// TestPlayerRejectsNVIDIA: an NVIDIA scenario's GPUs are not this package's to write.
func TestPlayerRejectsNVIDIA(t *testing.T) {
	sc, err := gpuscenario.Parse([]byte("profile: dgxa100\n"), "")
	require.NoError(t, err)
	_, err = NewPlayer(sc)
	require.ErrorContains(t, err, "profile dgxa100: not an AMD node")
}

// TestScenarioStart: the node is on disk when Start returns, and rewritten until stop.
func TestScenarioStart(t *testing.T) {
	s := player(t, demoScenario)
	root := t.TempDir()
	stop, err := s.Start(root, 10*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, amdgpu.Reader{Root: root}.Present())
	metrics := filepath.Join(root, "sys/class/drm/card0/device/gpu_metrics")
	first, err := os.ReadFile(metrics)
	require.NoError(t, err)
	poll.Until(t, 10*time.Second, "gpu_metrics rewritten with grown energy and accumulation counters", func() bool {
		now, err := os.ReadFile(metrics)
		return err == nil && !bytes.Equal(now, first)
	})
	require.NoError(t, stop())
	require.NoError(t, stop(), "stop is idempotent")
}
