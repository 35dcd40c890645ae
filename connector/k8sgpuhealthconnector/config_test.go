// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, kubeclient.AuthTypeKubeConfig, custom.AuthType)
	assert.Equal(t, "testdata/kubeconfig", custom.KubeConfigPath)
	assert.Equal(t, "nowhere", custom.Context)
	assert.Equal(t, 30*time.Second, custom.SyncTimeout)
	assert.Equal(t, time.Minute, custom.Interval)
	assert.Equal(t, time.Hour, custom.MaxDataAge)
	assert.Equal(t, []xid.Resolution{xid.ResolutionReboot}, custom.Faults.XIDResolutions)
	assert.Equal(t, StateFault{Enabled: false, For: 10 * time.Minute}, custom.Faults.PCIeDowngrade, "for keeps its default")
	assert.Equal(t, StateFault{Enabled: true, For: 5 * time.Minute}, custom.Faults.DriverHang, "enabled keeps its default")
	assert.Equal(t, StateFault{Enabled: true}, custom.Faults.GPULost)
	assert.Equal(t, LeaderElectionConfig{LeaseName: "gpu-health", LeaseNamespace: "gpu-ops", LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second, RetryPeriod: 10 * time.Second}, custom.LeaderElection)
	assert.False(t, custom.Metrics.GpuNodeFaultsTotal.Enabled)
	assert.True(t, custom.Metrics.GpuNodeUnhealthy.Enabled)
	assert.Equal(t, QuarantineConfig{
		Enabled: true, DryRun: false,
		Cordon: []Action{ActionReboot, ActionInspectHardware}, Taint: []Action{ActionInspectHardware},
		UncordonAfter: 30 * time.Minute, EscalationWindow: 72 * time.Hour,
		Breaker:          BreakerConfig{MaxShare: 0.05, MaxNodes: 4, Window: 2 * time.Hour},
		GPUResourceNames: []string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"},
		DeviceTaint:      DeviceTaintConfig{Enabled: true, Drivers: []string{"gpu.nvidia.com", "gpu.example.com"}, Effect: resourcev1.DeviceTaintEffectNoExecute},
	}, custom.Quarantine)
	assert.Equal(t, ValidationConfig{
		Enabled: true, DryRun: false, TaintKey: "example.com/gpu-burn-in", TaintEffect: corev1.TaintEffectNoExecute, Passes: 6, RequireCheck: false, Timeout: time.Hour,
	}, custom.Validation)
	assert.False(t, custom.Events.GpuQuarantineBreaker.Enabled)
	assert.True(t, custom.Events.GpuNodeQuarantine.Enabled)

	assert.False(t, def.Quarantine.Enabled, "quarantine is opt-in")
	assert.True(t, def.Quarantine.DryRun, "and a dry run when enabled")
	assert.False(t, def.Validation.Enabled, "the validation gate is opt-in")
	assert.True(t, def.Validation.DryRun, "and a dry run when enabled")
	assert.Equal(t, "otelcol-gpu.io/validation-pending", def.Validation.TaintKey)
	assert.Equal(t, corev1.TaintEffectNoSchedule, def.Validation.TaintEffect)
	assert.Equal(t, DeviceTaintConfig{Enabled: true, Drivers: []string{"gpu.nvidia.com"}, Effect: resourcev1.DeviceTaintEffectNoSchedule}, def.Quarantine.DeviceTaint,
		"a GPU of NVIDIA's DRA driver is taken out alone")
	assert.Equal(t, Actions, def.Quarantine.Cordon, "the default list is not the one a configuration was decoded into")
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{"bad_auth_type", `auth_type: must be one of serviceAccount, kubeConfig; got "token"`},
		{"kubeconfig_with_service_account", "kubeconfig_path and context are only used with auth_type kubeConfig: remove them or set auth_type: kubeConfig"},
		{"zero_sync_timeout", "sync_timeout must be positive, got 0s"},
		{"zero_interval", "interval must be positive, got 0s"},
		{"negative_max_data_age", "max_data_age must be positive, got -1m0s"},
		{"xid_class_without_action", `faults::xid_resolutions[1]: must be one of reset_gpu, reboot, check_nvlink; got "restart_app" (another class calls for no action here: give a code a class in the gpu receiver's xid::table)`},
		{"xid_class_unknown", `faults::xid_resolutions[0]: must be one of reset_gpu, reboot, check_nvlink; got "rebooot"`},
		{"xid_class_twice", `faults::xid_resolutions lists "reboot" twice`},
		{"negative_for", "faults::pcie_downgrade::for must not be negative, got -1s"},
		{"bad_lease_name", `leader_election::lease_name "GPU_Health" is not a valid object name: a lowercase RFC 1123 subdomain`},
		{"bad_lease_namespace", `leader_election::lease_namespace "gpu.ops" is not a valid namespace: must not contain dots`},
		{"zero_retry_period", "leader_election::retry_period must be positive, got 0s"},
		{"renew_deadline_below_retry_period", "leader_election::renew_deadline (2s) must exceed 1.2 times retry_period (2s)"},
		{"lease_duration_below_renew_deadline", "leader_election::lease_duration (10s) must exceed renew_deadline (10s): a leader must renew before another may take the Lease"},
		{"cordon_unknown_action", `quarantine::cordon::0: must be one of reset_gpu, reboot, check_nvlink, inspect_hardware; got "drain"`},
		{"cordon_twice", `quarantine::cordon lists "reboot" twice`},
		{"taint_without_cordon", `quarantine::taint lists "reboot", which quarantine::cordon does not: the taint goes with a cordon`},
		{"negative_uncordon_after", "quarantine::uncordon_after must not be negative (0 turns it off), got -1m0s"},
		{"negative_escalation_window", "quarantine::escalation_window must not be negative (0 turns it off), got -1h0m0s"},
		{"share_above_one", "quarantine::breaker::max_share must be above 0 and at most 1 (0.1 is 10 % of the GPU nodes), got 10"},
		{"zero_share", "quarantine::breaker::max_share must be above 0 and at most 1 (0.1 is 10 % of the GPU nodes), got 0"},
		{"negative_max_nodes", "quarantine::breaker::max_nodes must not be negative (0: the share alone), got -1"},
		{"zero_breaker_window", "quarantine::breaker::window must be positive, got 0s"},
		{"device_taint_effect", `quarantine::device_taint::effect must be NoSchedule or NoExecute, got "PreferNoSchedule"`},
		{"device_taint_no_drivers", "quarantine::device_taint::drivers must name at least one DRA driver while device_taint is enabled, e.g. gpu.nvidia.com"},
		{"device_taint_bad_driver", `quarantine::device_taint::drivers[1] "GPU_Driver" is not a DRA driver name like gpu.nvidia.com`},
		{"device_taint_bad_driver", `quarantine::device_taint::drivers lists "gpu.nvidia.com" twice`},
		{"no_gpu_resources", "quarantine::gpu_resource_names must list at least one resource, e.g. nvidia.com/gpu"},
		{"bad_gpu_resource", `quarantine::gpu_resource_names: "gpu" is not an extended resource name like nvidia.com/gpu`},
		{"bad_validation_taint_key", `validation::taint_key "gpu burn-in" is not a taint key like otelcol-gpu.io/validation-pending`},
		{"validation_taint_is_quarantines", "validation::taint_key must not be the quarantine's taint otelcol-gpu.io/gpu-unhealthy"},
		{"bad_validation_taint_effect", `validation::taint_effect must be one of NoSchedule, PreferNoSchedule, NoExecute; got "NoScheduling"`},
		{"zero_validation_passes", "validation::passes must be at least 1, got 0"},
		{"zero_validation_timeout", "validation::timeout must be positive, got 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(configtest.Load[Config](t, NewFactory(), tt.name))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
