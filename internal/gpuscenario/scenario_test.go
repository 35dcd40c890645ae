// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shippedScenarios are the scenario files of the repository: the demos', the tests' and the
// replays of captures here. The receiver's invalid.yaml is a list of mistakes, and
// test/realnode's scenario a Go template of one: both left out.
func shippedScenarios(tb testing.TB) []string {
	tb.Helper()
	var files []string
	for _, pattern := range []string{
		"../../distro/scenarios/*.yaml",
		"../../test/e2e/testdata/*-compressed.yaml",
		"../../receiver/gpureceiver/testdata/scenarios/*.yaml",
		"../../processor/gpuattributionprocessor/testdata/scenarios/*.yaml",
		"../../connector/k8sgpuhealthconnector/testdata/faults-scenario.yaml",
		"testdata/replay-*.yaml",
	} {
		matches, err := filepath.Glob(pattern)
		require.NoError(tb, err)
		require.NotEmpty(tb, matches, pattern)
		for _, m := range matches {
			if filepath.Base(m) != "invalid.yaml" {
				files = append(files, m)
			}
		}
	}
	return files
}

func TestShippedScenariosLoad(t *testing.T) {
	vendors := map[Vendor]int{}
	for _, f := range shippedScenarios(t) {
		sc, err := Load(f)
		require.NoError(t, err, f)
		vendors[sc.Vendor()]++
	}
	assert.Positive(t, vendors[NVIDIA])
	assert.Positive(t, vendors[AMD])
}

// TestVendorFollowsTheProfile: one format for both vendors; the profile says whose node it is.
func TestVendorFollowsTheProfile(t *testing.T) {
	for profile, want := range map[string]Vendor{"dgxa100": NVIDIA, "dgxh100": NVIDIA, "dgxh200": NVIDIA, "dgxb200": NVIDIA, "mi300x": AMD} {
		sc, err := Parse([]byte("profile: "+profile+"\n"), "")
		require.NoError(t, err)
		assert.Equal(t, want, sc.Vendor(), profile)
		assert.Equal(t, 8, sc.GPUs, "the profile's GPUs")
	}
}

// TestErrorsNameTheKey: each mistake is reported with its YAML path, all of them at once.
func TestErrorsNameTheKey(t *testing.T) {
	for body, want := range map[string]string{
		"profile: dgxz100\n":             `profile: must be one of dgxa100, dgxh100, dgxh200, dgxb200 (NVIDIA) or mi300x (AMD), got "dgxz100"`,
		"profile: dgxa100\ngpus: 2000\n": "gpus: must be between 1 and 1024, got 2000",
		"profile: mi300x\ngpus: 9\n":     "gpus: must be between 1 and 8, got 9",
		"profile: dgxa100\nfaults: [{at: 1m, gpu: 0}, {at: 2m, gpu: 9, kind: gpu_lost}]\n":        "faults[1].gpu: 9 is not a device (the node has 8)",
		"profile: dgxa100\ngpus: 2\nprocesses: [{pid: 1, gpu: 5}]\n":                              "processes[0].gpu: 5 is not a device (the node has 2)",
		"profile: dgxa100\ndevices: [{index: -1}]\n":                                              "devices[0].index: -1 is not a device (the node has 8)",
		"profile: dgxa100\nprocesses: [{gpu: 0}]\n":                                               "processes[0].pid: must be set",
		"profile: dgxa100\nprocesses: [{pid: 1, gpu: 0, sm: 101}]\n":                              "processes[0].sm: is a percent, got 101",
		"profile: dgxa100\nsignals: {power: {constant: 1, sine: {min: 0, max: 1, period: 1m}}}\n": "signals.power: set exactly one of constant, step, sine, random_walk",
		"profile: dgxa100\nsignals: {memory: {step: [{at: -1s, value: 1}]}}\n":                    "signals.memory: step[0]: at must not be negative, got -1s",
		"profile: dgxa100\nactivity: {sm: 1.5}\n":                                                 "activity.sm: a fraction between 0 and 1, got 1.5",
		"profile: dgxa100\nmig: [{gpu: 1, instances: 8, memory_mib: 1}]\n":                        "mig[0].instances: must be between 1 and 7, got 8",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: hang}]\n":                                      "faults[0]: kind hang needs a duration",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: nvlink_down, link: 12}]\n":                     "faults[0].link: dgxa100 GPUs have links 0 to 11, got 12",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: fabric_down}]\n":                               "faults[0]: kind fabric_down needs a profile with an NVSwitch fabric",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: gpu_lost, message: x}]\n":                      "faults[0].message: is one line of an xid fault",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: ras, block: umc, corrected: 1}]\n":             `faults[0].kind: must be one of xid, gpu_lost, reset_required, hang, ecc, row_remap_pending, row_remap_failed, pcie_downgrade, thermal_slowdown, fabric_down, fabric_degraded, nvlink_down, collective_wait, recovery_action (profile dgxa100), got "ras"`,
		"profile: dgxa100\nfaults: [{gpu: 0, kind: pcie_downgrade, generation: 6}]\n":             "faults[0]: kind pcie_downgrade needs a width or a generation from 1 to 5",
		"profile: dgxa100\nfaults: [{gpu: 0, kind: recovery_action, action: reboot}]\n":           `faults[0].action: kind recovery_action needs an action: gpu_reset, node_reboot, drain_p2p, drain_and_reset, recover_imex_domain, bus_reset, system_reboot, got "reboot"`,
		"profile: dgxa100\nfaults: [{gpu: 0, kind: recovery_action, action: none}]\n":             `faults[0].action: kind recovery_action needs an action`,
		"profile: dgxa100\nfaults: [{gpu: 0, kind: hang, duration: 1s, action: gpu_reset}]\n":     "faults[0].action: is a recovery_action fault's",
		"profile: dgxa100\nunknown: 1\n":                                                          "field unknown not found",
		// The AMD simulation's limits, each naming what it does not play.
		"profile: mi300x\nsignals: {utilization: {step: [{at: 0s, value: 101}]}}\n":        "signals.utilization: busy is a percent, got 101",
		"profile: mi300x\nsignals: {utilization: {sine: {min: 0, max: 1, period: 1m}}}\n":  "signals.utilization: the AMD simulation plays a constant or step load",
		"profile: mi300x\ndevices: [{index: 1, signals: {temperature: {constant: 50}}}]\n": "devices[0].signals.temperature: the AMD simulation (profile mi300x) does not play it; remove it",
		"profile: mi300x\nseed: 4\n":                                           "seed: the AMD simulation (profile mi300x) does not play it",
		"profile: mi300x\nmig: [{gpu: 0, instances: 2, memory_mib: 10}]\n":     "mig[0]: the AMD simulation (profile mi300x) does not play it",
		"profile: mi300x\nprocesses: [{pid: 1, gpu: 0, sm: 10}]\n":             "processes[0].sm: the AMD simulation (profile mi300x) does not play it",
		"profile: mi300x\nfaults: [{gpu: 0, kind: ras}]\n":                     "faults[0]: kind ras needs a block and corrected or uncorrected errors",
		"profile: mi300x\nfaults: [{gpu: 0, kind: throttle, limiter: edge}]\n": `faults[0]: kind throttle needs a limiter: prochot, ppt, socket_thermal, vr_thermal, hbm_thermal, got "edge"`,
		"profile: mi300x\nfaults: [{gpu: 0, kind: xid, xid: 13}]\n":            `faults[0].kind: must be one of ras, pcie_downgrade, throttle, gpu_lost (profile mi300x), got "xid"`,
		"profile: mi300x\nfaults: [{gpu: 0, kind: gpu_lost, at: -1s}]\n":       "faults[0]: at and duration must not be negative",
	} {
		_, err := Parse([]byte(body), "")
		assert.ErrorContains(t, err, want, body)
	}
}

// TestErrorsAllAtOnce: a file with several mistakes reports each, and an unknown profile does
// not hide the others.
func TestErrorsAllAtOnce(t *testing.T) {
	_, err := Load("../../receiver/gpureceiver/testdata/scenarios/invalid.yaml")
	require.EqualError(t, err, `profile: must be one of dgxa100, dgxh100, dgxh200, dgxb200 (NVIDIA) or mi300x (AMD), got "dgxz100"
signals.utilization: set exactly one of constant, step, sine, random_walk
activity.sm: a fraction between 0 and 1, got 1.5
devices[0].activity.dram: a fraction between 0 and 1, got -0.1
processes[0].gpu: 5 is not a device (the node has 2)
processes[0].pid: must be set
processes[0].sm: is a percent, got 150
mig[0].busy: must be between 0 and instances (2), got 3
faults[0]: kind hang needs a duration
faults[1].kind: must be one of xid, gpu_lost, reset_required, hang, ecc, row_remap_pending, row_remap_failed, pcie_downgrade, thermal_slowdown, fabric_down, fabric_degraded, nvlink_down, collective_wait, recovery_action, ras, throttle (profile dgxz100), got "meltdown"
faults[2]: kind nvlink_down needs a link number, got -1
faults[3].message: is one line of an xid fault
faults[4]: kind collective_wait needs a share above 0 and at most 1 (1: a hung collective), got 1.5`)
}

func TestSignals(t *testing.T) {
	ten := 10.0
	assert.Equal(t, 10.0, NewTrack(&Signal{Constant: &ten}, 0, 1).At(time.Hour))
	assert.Equal(t, 35.0, NewTrack(nil, 35, 1).At(time.Hour), "a missing signal is its fallback constant")

	step := NewTrack(&Signal{Step: []StepPoint{{At: time.Minute, Value: 1}, {At: 2 * time.Minute, Value: 2}}}, 0, 1)
	assert.Equal(t, 1.0, step.At(0), "before the first step, its value")
	assert.Equal(t, 1.0, step.At(90*time.Second))
	assert.Equal(t, 2.0, step.At(3*time.Minute))

	sine := NewTrack(&Signal{Sine: &Sine{Min: 20, Max: 80, Period: 4 * time.Minute}}, 0, 1)
	assert.InDelta(t, 50.0, sine.At(0), 1e-9)
	assert.InDelta(t, 80.0, sine.At(time.Minute), 1e-9)
	assert.InDelta(t, 20.0, sine.At(3*time.Minute), 1e-9)

	spec := &Signal{RandomWalk: &RandomWalk{Min: 30, Max: 40, Step: 5, Every: time.Second}}
	a, b := NewTrack(spec, 0, 7), NewTrack(spec, 0, 7)
	var seq []float64
	for s := range 100 {
		v := a.At(time.Duration(s) * time.Second)
		require.GreaterOrEqual(t, v, 30.0)
		require.LessOrEqual(t, v, 40.0)
		seq = append(seq, v)
	}
	assert.Equal(t, seq[99], b.At(99*time.Second), "the same seed walks the same path, read in any order")
	assert.Equal(t, seq[10], a.At(10*time.Second), "reading an earlier time replays the walk")
	assert.NotEqual(t, seq[99], NewTrack(spec, 0, 8).At(99*time.Second), "another seed walks elsewhere")
}
