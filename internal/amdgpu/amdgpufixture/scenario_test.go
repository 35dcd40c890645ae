// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

const demoScenario = "../../../distro/scenarios/mi300x-demo.yaml"

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
	s, err := LoadScenario(demoScenario)
	require.NoError(t, err)
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
	_, err = os.Stat(filepath.Join(root, "sys/class/kfd/kfd/proc/31004"))
	require.NoError(t, err, "the process directory stays: the process still runs")
	vram, errs = amdgpu.Reader{Root: root}.ProcessVRAM()
	require.Empty(t, errs)
	assert.Len(t, vram, 7, "no VRAM on the lost GPU")
}

func TestScenarioErrors(t *testing.T) {
	for body, want := range map[string]string{
		"profile: mi250x\n": `profile must be mi300x, got "mi250x"`,
		"profile: mi300x\nload: [{at: 0s, busy: 101}]\n":                             "load[0]: busy is a percent and at not negative, got 101 at 0s",
		"profile: mi300x\ndevices: [{index: 8}]\n":                                   "devices[0]: gpu index 8 is outside 0..7",
		"profile: mi300x\nprocesses: [{gpu: 0}]\n":                                   "processes[0]: pid must be set",
		"profile: mi300x\nfaults: [{gpu: 0, kind: ras}]\n":                           "faults[0]: kind ras needs a block and corrected or uncorrected errors",
		"profile: mi300x\nfaults: [{gpu: 0, kind: pcie_downgrade, generation: 6}]\n": "faults[0]: kind pcie_downgrade needs a width or a generation from 1 to 5",
		"profile: mi300x\nfaults: [{gpu: 0, kind: throttle, limiter: edge}]\n":       `faults[0]: kind throttle needs a limiter: prochot, ppt, socket_thermal, vr_thermal or hbm_thermal, got "edge"`,
		"profile: mi300x\nfaults: [{gpu: 0, kind: xid}]\n":                           `faults[0]: kind must be one of ras, pcie_downgrade, throttle, gpu_lost, got "xid"`,
		"profile: mi300x\nfaults: [{gpu: 0, kind: gpu_lost, at: -1s}]\n":             "faults[0]: at and duration must not be negative",
		"profile: mi300x\ngpus: 4\n":                                                 "field gpus not found",
	} {
		path := filepath.Join(t.TempDir(), "s.yaml")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		_, err := LoadScenario(path)
		assert.ErrorContains(t, err, want, body)
	}
}

// TestScenarioStart: the node is on disk when Start returns, and rewritten until stop.
func TestScenarioStart(t *testing.T) {
	s, err := LoadScenario(demoScenario)
	require.NoError(t, err)
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
