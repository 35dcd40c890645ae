// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
)

// The test binary is the command's child too: the parent re-executes it with readerArg.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == readerArg {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// scenario writes a simulated node of gpus GPUs of profile with faults (YAML flow mappings, one
// a line) and returns its path.
func scenario(t *testing.T, profile string, gpus int, faults ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "profile: %s\ngpus: %d\nseed: 7\n", profile, gpus)
	if len(faults) > 0 {
		b.WriteString("faults:\n")
		for _, f := range faults {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// bound is how long past its own -timeout a run may take before the test gives up on it: the
// command must kill its reads at -timeout, whatever they wait on.
const bound = 30 * time.Second

// runCheck runs the command with args and fails the test if it has not returned within
// -timeout (30s unless args set it) and bound.
func runCheck(t *testing.T, args ...string) result {
	t.Helper()
	timeout := 30 * time.Second
	for i, a := range args {
		if a == "-timeout" {
			d, err := time.ParseDuration(args[i+1])
			require.NoError(t, err)
			timeout = d
		}
	}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(args, strings.NewReader(""), &stdout, &stderr) }()
	select {
	case code := <-done:
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	case <-time.After(timeout + bound):
		t.Fatalf("the check did not return within its -timeout %s (and %s more): the reads were not abandoned", timeout, bound)
		return result{}
	}
}

// checkJSON runs the command with -o json and decodes its report.
func checkJSON(t *testing.T, args ...string) (result, report) {
	t.Helper()
	res := runCheck(t, append([]string{"-o", "json"}, args...)...)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	assert.Equal(t, res.code, rep.ExitCode, "the report's exit code is the command's")
	return res, rep
}

func statuses(rep report) map[string]string {
	out := map[string]string{}
	for _, c := range rep.Checks {
		out[c.Name] = c.Status
	}
	return out
}

func TestHealthyNode(t *testing.T) {
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", scenario(t, "dgxh100", 8), "-gpus", "8", "-node-name", "gpu-node-07")
	require.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)
	assert.Equal(t, statusHealthy, rep.Status)
	assert.Equal(t, schemaVersion, rep.SchemaVersion)
	assert.Equal(t, "gpu-node-07", rep.Node)
	assert.Empty(t, rep.Findings)
	require.Len(t, rep.GPUs, 8)
	for i, g := range rep.GPUs {
		assert.Equal(t, i, g.Index)
		assert.True(t, g.Up)
		assert.True(t, strings.HasPrefix(g.UUID, "GPU-"), g.UUID)
		assert.Equal(t, "550.54.15", g.DriverVersion)
		require.NotNil(t, g.NVLinksUp)
		assert.Equal(t, 18, *g.NVLinksUp, "an H100 SXM has 18 NVLinks")
	}
	want := map[string]string{
		checkBackend: checkPass, checkGPUCount: checkPass, checkGPUHealth: checkPass, checkRecovery: checkPass, checkXID: checkPass,
		checkNVLink: checkPass, checkClocks: checkPass, checkDriverVersion: checkPass, checkInfiniBand: checkSkipped,
	}
	assert.Equal(t, want, statuses(rep))

	// The table says the same.
	table := runCheck(t, "-backend", "simulated", "-scenario", scenario(t, "dgxh100", 8), "-gpus", "8", "-node-name", "gpu-node-07")
	assert.Equal(t, exitHealthy, table.code)
	assert.Contains(t, table.stdout, "otelcol-gpu-check on gpu-node-07: HEALTHY (exit 0)")
	assert.Contains(t, table.stdout, "NVIDIA H100 80GB HBM3")
}

// Each fault the simulation plays fails the check naming the GPU and the action, or passes it
// where it is no fault of the node.
func TestEachSimulatedFault(t *testing.T) {
	const gpu = 2
	for _, tc := range []struct {
		fault, profile string
		// check, kind and action of the finding on GPU 2; empty check: the node is healthy.
		check, kind, action string
	}{
		{fault: "kind: xid, xid: 79", check: checkGPUHealth, kind: "gpu_lost", action: "reboot"},
		{fault: "kind: xid, xid: 48", check: checkXID, kind: "xid", action: "reset_gpu"},
		{fault: `kind: xid, xid: 149, message: "NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x00086226)"`, check: checkXID, kind: "xid", action: "check_nvlink"},
		// The application's fault, not the node's (-xid-classes leaves restart_app out).
		{fault: "kind: xid, xid: 13"},
		{fault: "kind: gpu_lost", check: checkGPUHealth, kind: "gpu_lost", action: "reboot"},
		{fault: "kind: reset_required", check: checkGPUHealth, kind: "gpu_lost", action: "reboot"},
		{fault: "kind: hang, duration: 1h", check: checkGPUHealth, kind: "driver_hang", action: "reboot"},
		{fault: "kind: ecc, uncorrected: 1", check: checkGPUHealth, kind: "double_bit_ecc", action: "reset_gpu"},
		// Corrected errors are the memory doing its work.
		{fault: "kind: ecc, corrected: 24"},
		{fault: "kind: row_remap_pending", check: checkGPUHealth, kind: "row_remap_pending", action: "reset_gpu"},
		{fault: "kind: row_remap_failed", check: checkGPUHealth, kind: "row_remap_failed", action: "inspect_hardware"},
		{fault: "kind: pcie_downgrade, width: 8", check: checkGPUHealth, kind: "pcie_downgrade", action: "inspect_hardware"},
		{fault: "kind: thermal_slowdown, duration: 1h", check: checkClocks, action: "inspect_hardware"},
		{fault: "kind: fabric_down", check: checkGPUHealth, kind: "nvlink_fabric", action: "check_nvlink"},
		{fault: "kind: fabric_degraded", check: checkGPUHealth, kind: "nvlink_fabric", action: "check_nvlink"},
		{fault: "kind: nvlink_down, link: 5", check: checkNVLink, action: "check_nvlink"},
		// The driver's word alone, with no fault of ours: a node reboot, a drain of peer traffic.
		{fault: "kind: recovery_action, action: node_reboot, duration: 1h", check: checkRecovery, kind: "recovery_action", action: "reboot"},
		{fault: "kind: recovery_action, action: drain_p2p, duration: 1h", check: checkRecovery, kind: "recovery_action", action: "check_nvlink"},
		// A job's straggler: the node is fine.
		{fault: "kind: collective_wait, share: 1"},
		{fault: "kind: pcie_downgrade, generation: 3", profile: "dgxa100"}, // idle: GPUs lower the generation to save power
	} {
		t.Run(tc.fault, func(t *testing.T) {
			profile := tc.profile
			if profile == "" {
				profile = "dgxh100"
			}
			sc := scenario(t, profile, 4, fmt.Sprintf("{at: 0s, gpu: %d, %s}", gpu, tc.fault))
			res, rep := checkJSON(t, "-backend", "simulated", "-scenario", sc, "-gpus", "4", "-call-timeout", "2s", "-timeout", "20s")
			if tc.check == "" {
				assert.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)
				return
			}
			require.Equal(t, exitUnhealthy, res.code, "%+v", rep.Findings)
			assert.Equal(t, checkFail, statuses(rep)[tc.check])
			var found bool
			for _, f := range rep.Findings {
				if f.Check == tc.check && f.Kind == tc.kind && f.GPU != nil && *f.GPU == gpu {
					found = true
					assert.Equal(t, tc.action, f.Action)
					assert.Contains(t, f.Subject, fmt.Sprintf("GPU %d (GPU-", gpu))
					assert.NotEmpty(t, f.ActionWords)
				}
				assert.NotEqual(t, checkUnknown, f.Status, "everything could be checked: %+v", f)
			}
			assert.True(t, found, "no %s finding of kind %q on GPU %d: %+v", tc.check, tc.kind, gpu, rep.Findings)
			table := runCheck(t, "-backend", "simulated", "-scenario", sc, "-gpus", "4", "-call-timeout", "2s", "-timeout", "20s")
			assert.Contains(t, table.stdout, fmt.Sprintf("GPU %d (GPU-", gpu))
			assert.Contains(t, table.stdout, tc.action)
		})
	}
}

// Fewer GPUs than -gpus: the node needs a reboot.
func TestMissingGPU(t *testing.T) {
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", scenario(t, "dgxa100", 7), "-gpus", "8")
	require.Equal(t, exitUnhealthy, res.code)
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, checkGPUCount, f.Check)
	assert.Equal(t, "reboot", f.Action)
	assert.Equal(t, "the node", f.Subject)
	assert.Contains(t, f.Message, "7 GPUs detected, 8 expected")
}

// Every GPU hangs: identifying them one after the other takes longer than -timeout, so the
// parent kills the reads at -timeout and names the GPUs whose calls it saw pass -call-timeout.
func TestHangBoundedByTimeout(t *testing.T) {
	var faults []string
	for i := range 8 {
		faults = append(faults, fmt.Sprintf("{at: 0s, gpu: %d, kind: hang, duration: 1h}", i))
	}
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", scenario(t, "dgxa100", 8, faults...), "-timeout", "6s", "-call-timeout", "1s")
	require.Equal(t, exitUnhealthy, res.code, "%+v", rep.Findings)
	require.NotEmpty(t, rep.Findings)
	first := rep.Findings[0]
	assert.Equal(t, checkGPUHealth, first.Check)
	assert.Equal(t, "driver_hang", first.Kind)
	assert.Equal(t, "reboot", first.Action)
	require.NotNil(t, first.GPU)
	assert.Equal(t, 0, *first.GPU, "GPU 0 is identified first")
	assert.Contains(t, first.Message, "hung")
	last := rep.Findings[len(rep.Findings)-1]
	assert.Equal(t, checkReads, last.Check)
	assert.Equal(t, checkUnknown, last.Status)
	assert.Contains(t, last.Message, "did not finish within -timeout 6s and were killed")
	assert.Equal(t, checkFail, statuses(rep)[checkGPUHealth])
	assert.Equal(t, checkUnknown, statuses(rep)[checkXID], "the rest could not be checked")
}

// The kernel log since boot, from real nodes' logs: XID 119 (GSP timeout, reset_gpu) on PCI
// addresses the simulated GPUs do not have fails the check by its address; a log without XIDs
// passes.
func TestKernelLogCaptures(t *testing.T) {
	captures := filepath.Join("..", "..", "receiver", "gpureceiver", "testdata", "captures")
	sc := scenario(t, "dgxh100", 8)
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", sc, "-kmsg-path", mustAbs(t, filepath.Join(captures, "dmesg-with-xid-119.log")))
	require.Equal(t, exitUnhealthy, res.code)
	require.NotEmpty(t, rep.Findings)
	for _, f := range rep.Findings {
		assert.Equal(t, checkXID, f.Check)
		assert.Equal(t, "reset_gpu", f.Action)
		assert.True(t, strings.HasPrefix(f.Subject, "PCI "), f.Subject)
		assert.Contains(t, f.Message, "XID 119, GSP RPC timeout")
	}

	res, rep = checkJSON(t, "-backend", "simulated", "-scenario", sc, "-kmsg-path", mustAbs(t, filepath.Join(captures, "kmsg.1.log")))
	assert.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)

	// -xid-classes without reset_gpu: the same log passes.
	res, _ = checkJSON(t, "-backend", "simulated", "-scenario", sc, "-kmsg-path", mustAbs(t, filepath.Join(captures, "dmesg-with-xid-119.log")), "-xid-classes", "reboot")
	assert.Equal(t, exitHealthy, res.code)

	// An unreadable kernel log: XIDs unknown, so the node could not be checked.
	res, rep = checkJSON(t, "-backend", "simulated", "-scenario", sc, "-kmsg-path", filepath.Join(t.TempDir(), "missing.log"))
	assert.Equal(t, exitCouldNotCheck, res.code)
	assert.Equal(t, checkUnknown, statuses(rep)[checkXID])

	// -kmsg=false (the agent's DaemonSet, whose container cannot open /dev/kmsg): the kernel log
	// is not read, so neither its XIDs nor its absence count; the rest is checked.
	res, rep = checkJSON(t, "-backend", "simulated", "-scenario", sc, "-kmsg=false")
	assert.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)
	assert.Equal(t, checkSkipped, statuses(rep)[checkXID])
	assert.Equal(t, checkPass, statuses(rep)[checkGPUHealth])
}

// The InfiniBand ports of a real capture (procfs's fixture: mlx4_0 ports 1 and 2 ACTIVE at 40
// Gb/s, hfi1_0 port 1 ACTIVE at 100, mlx5_0 port 1 ACTIVE at 25).
func TestInfiniBand(t *testing.T) {
	root := mustAbs(t, filepath.Join("..", "..", "receiver", "taskreceiver", "testdata", "captures", "procfs"))
	sc := scenario(t, "dgxa100", 2)
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", sc, "-root-path", root, "-ib-ports", "3", "-ib-rate-gbps", "40")
	assert.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)

	res, rep = checkJSON(t, "-backend", "simulated", "-scenario", sc, "-root-path", root, "-ib-ports", "2", "-ib-rate-gbps", "100")
	require.Equal(t, exitUnhealthy, res.code)
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, checkInfiniBand, f.Check)
	assert.Equal(t, actionCheckInfiniBand, f.Action)
	assert.Contains(t, f.Message, "1 RDMA ports ACTIVE at 100 Gb/s or faster, 2 expected")
	assert.Contains(t, f.Message, "mlx5_0 port 1 (ACTIVE, 25 Gb/s)")
}

// A driver other than -driver-version fails every GPU that runs it.
func TestDriverVersion(t *testing.T) {
	res, rep := checkJSON(t, "-backend", "simulated", "-scenario", scenario(t, "dgxa100", 2), "-driver-version", "570.86.15")
	require.Equal(t, exitUnhealthy, res.code)
	require.Len(t, rep.Findings, 2)
	for _, f := range rep.Findings {
		assert.Equal(t, checkDriverVersion, f.Check)
		assert.Equal(t, actionUpdateDriver, f.Action)
		assert.Contains(t, f.Message, "where 570.86.15 is expected")
	}
}

// Without a driver the node cannot be checked.
func TestNoDriver(t *testing.T) {
	res, rep := checkJSON(t, "-backend", "nvml", "-library-path", filepath.Join(t.TempDir(), "libnvidia-ml.so.1"), "-gpus", "8")
	require.Equal(t, exitCouldNotCheck, res.code, "%+v", rep.Findings)
	assert.Equal(t, statusUnknown, rep.Status)
	assert.Equal(t, checkUnknown, statuses(rep)[checkBackend])
	assert.Contains(t, rep.Findings[0].Message, "NVML could not be initialized")
}

func TestBadFlags(t *testing.T) {
	sc := scenario(t, "dgxa100", 2)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml"}, "-o must be table or json"},
		{[]string{"-timeout", "0s"}, "-timeout must be positive"},
		{[]string{"-timeout", "5s", "-call-timeout", "5s"}, "-call-timeout (5s) must be shorter than -timeout (5s)"},
		{[]string{"-gpus", "-3"}, "-gpus must be a GPU count"},
		{[]string{"-nvlinks", "-2"}, "-nvlinks must be a link count"},
		{[]string{"-ib-rate-gbps", "400"}, "-ib-rate-gbps needs -ib-ports"},
		{[]string{"-kmsg=false", "-kmsg-path", "/var/log/kern.log"}, "-kmsg-path is read only with -kmsg (the default): remove one"},
		{[]string{"-xid-classes", "reboot,explode"}, `-xid-classes: "explode" is not an XID class`},
		{[]string{"-backend", "cuda"}, `-backend: `},
		{[]string{"-backend", "simulated"}, "scenario must name a scenario file"},
		{[]string{"-scenario", sc}, "scenario is only read with backend: simulated"},
		{[]string{"-root-path", "relative"}, "root_path must be an absolute path"},
		{[]string{"-gpus", "eight"}, `invalid value "eight" for flag -gpus`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			res := runCheck(t, tc.args...)
			assert.Equal(t, exitCouldNotCheck, res.code)
			assert.Empty(t, res.stdout, "nothing is checked")
			assert.Contains(t, res.stderr, tc.want)
		})
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	return abs
}

// The amdgpu backend, on the files of an MI300X node: healthy, then with one GPU's link at
// half its lanes.
func TestAMDNode(t *testing.T) {
	root := t.TempDir()
	node := amdgpufixture.MI300X()
	require.NoError(t, amdgpufixture.Write(root, node))
	res, rep := checkJSON(t, "-backend", "amdgpu", "-root-path", root, "-gpus", "8")
	require.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)
	assert.Len(t, rep.GPUs, 8)

	node.GPUs[5].LinkWidth = node.GPUs[5].MaxLinkWidth / 2
	require.NoError(t, amdgpufixture.Write(root, node))
	res, rep = checkJSON(t, "-backend", "amdgpu", "-root-path", root, "-gpus", "8")
	require.Equal(t, exitUnhealthy, res.code, "%+v", rep.Findings)
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, "pcie_downgrade", f.Kind)
	assert.Equal(t, "inspect_hardware", f.Action)
	require.NotNil(t, f.GPU)
	assert.Equal(t, 5, *f.GPU)
}

func TestHelp(t *testing.T) {
	res := runCheck(t, "-h")
	assert.Equal(t, exitHealthy, res.code)
	assert.Contains(t, res.stderr, "Usage: otelcol-gpu-check")
	assert.Contains(t, res.stderr, "-timeout")
}
