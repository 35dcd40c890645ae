// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, 15*time.Second, custom.CollectionInterval)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", custom.LibraryPath)
	assert.Equal(t, "/hostfs", custom.RootPath)
	assert.Equal(t, "gpu-node-07", custom.NodeName)
	require.NotNil(t, custom.ConfiguredGPUCount)
	assert.Equal(t, 8, *custom.ConfiguredGPUCount)
	assert.Equal(t, 2*time.Second, custom.CallTimeout)
	assert.Equal(t, InitRetryConfig{InitialInterval: time.Second, MaxInterval: time.Minute}, custom.InitRetry)
	assert.Equal(t, int64(1<<20), custom.MemoryLeakThreshold)
	assert.False(t, custom.Events.GpuXid.Enabled)
	assert.Equal(t, XIDConfig{
		NVMLEvents:   false,
		Kmsg:         true,
		KmsgPath:     "/var/log/kern.log",
		DedupWindow:  5 * time.Second,
		HealthWindow: 30 * time.Minute,
		Table: map[string]xid.Info{
			"13":  {Severity: "fatal", Resolution: "reboot", Action: "drain the node"},
			"999": {Meaning: "vendor test code", Severity: "info"},
		},
	}, custom.XID)
	assert.Equal(t, NodeCheckConfig{
		Enabled: true, Path: "/usr/bin/otelcol-gpu-check", Interval: 10 * time.Minute, Timeout: 45 * time.Second,
		Args: []string{"-ib-ports=8", "-ib-rate-gbps=400", "-driver-version=570.86.15"},
	}, custom.NodeCheck)
	assert.Equal(t, []string{
		"-o", "json", "-timeout", "45s", "-call-timeout", "2s", "-backend", "nvml", "-root-path", "/hostfs", "-node-name", "gpu-node-07",
		"-library-path", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "-kmsg-path", "/var/log/kern.log", "-gpus", "8",
		"-ib-ports=8", "-ib-rate-gbps=400", "-driver-version=570.86.15",
	}, custom.nodeCheckArgs(custom.NodeName), "the check reads the node as the receiver does")
	assert.False(t, def.NodeCheck.Enabled, "the node check is opt-in")

	sim := configtest.Load[Config](t, NewFactory(), "simulated")
	require.NoError(t, confmap.Validate(sim))
	assert.Equal(t, BackendSimulated, sim.Backend)

	amd := configtest.Load[Config](t, NewFactory(), "amdgpu")
	require.NoError(t, confmap.Validate(amd))
	assert.Equal(t, BackendAMDGPU, amd.Backend)
	assert.Equal(t, BackendAuto, def.Backend, "the default picks the vendor at start")
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{"bad_backend", `backend: must be one of auto, nvml, amdgpu, simulated; got "dcgm"`},
		{"scenario_with_nvml", "scenario is only read with backend: simulated; remove it or set backend: simulated"},
		{"library_with_simulated", "library_path is only used with backend: nvml or auto; remove it or set backend: nvml"},
		{"library_with_amdgpu", "library_path is only used with backend: nvml or auto; remove it or set backend: nvml"},
		{"scenario_with_amdgpu", "scenario is only read with backend: simulated; remove it or set backend: simulated"},
		{"no_scenario", "scenario must name a scenario file when backend is simulated"},
		{"missing_scenario", `scenario "testdata/scenarios/does-not-exist.yaml": open testdata/scenarios/does-not-exist.yaml: no such file or directory`},
		{"invalid_scenario", `scenario "testdata/scenarios/invalid.yaml": profile: must be one of dgxa100, dgxh100, dgxh200, dgxb200 (NVIDIA) or mi300x (AMD), got "dgxz100"
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
faults[4]: kind collective_wait needs a share above 0 and at most 1 (1: a hung collective), got 1.5`},
		{"amd_scenario", `scenario "../../distro/scenarios/mi300x-demo.yaml": profile: mi300x is an AMD node, which the simulated backend does not play: run it with cmd/demonode and backend amdgpu`},
		{"relative_root", `root_path must be an absolute path, got "hostfs"`},
		{"negative_gpu_count", "configured_gpu_count must not be negative, got -1"},
		{"zero_call_timeout", "call_timeout must be positive, got 0s"},
		{"zero_initial_interval", "init_retry::initial_interval must be positive, got 0s"},
		{"max_below_initial", "init_retry::max_interval must be at least init_retry::initial_interval (10s), got 5s"},
		{"negative_leak_threshold", "memory_leak_threshold must not be negative, got -1"},
		{"relative_kmsg_path", `xid::kmsg_path must be an absolute path, got "kern.log"`},
		{"negative_dedup_window", "xid::dedup_window must not be negative, got -1s"},
		{"zero_health_window", "xid::health_window must be positive, got 0s"},
		{"bad_xid_key", `xid::table: key "fallen" is not an XID code (a positive integer)`},
		{"bad_xid_severity", `xid::table::79::severity: must be one of info, warning, fatal; got "critical"`},
		{"bad_xid_resolution", `xid::table::79::resolution: must be one of none, restart_app, reset_gpu, reboot, check_nvlink, unknown; got "replace"`},
		{"zero_interval", `"collection_interval": requires positive value`},
		{"node_check_relative_path", `node_check::path must be an absolute path, got "otelcol-gpu-check"`},
		{"node_check_zero_interval", "node_check::interval must be positive, got 0s"},
		{"node_check_short_timeout", "node_check::timeout must be longer than call_timeout (5s): a hung GPU is found when its call passes call_timeout, got 5s"},
		{"node_check_own_flag", "node_check::args: -backend is set from the receiver's own keys (backend, library_path, scenario, root_path, xid::kmsg, xid::kmsg_path, node_name, call_timeout, configured_gpu_count, node_check::timeout); remove it"},
		{"node_check_not_a_flag", `node_check::args: "ib-ports=8" is not a flag: give each as -name=value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(configtest.Load[Config](t, NewFactory(), tt.name))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
