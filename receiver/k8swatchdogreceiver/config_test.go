// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, time.Minute, custom.CollectionInterval)
	assert.Equal(t, kubeclient.AuthTypeKubeConfig, custom.AuthType)
	assert.Equal(t, "testdata/kubeconfig", custom.KubeConfigPath)
	assert.Equal(t, "other", custom.Context)
	assert.Equal(t, 2*time.Minute, custom.SyncTimeout)
	assert.Equal(t, 5*time.Second, custom.HealthzTimeout)
	assert.Equal(t, "gpu-east", custom.ClusterName)
	assert.Equal(t, []string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}, custom.GPUResourceNames)
	assert.Equal(t, "app.kubernetes.io/name", custom.ServiceLabel)
	assert.Equal(t, []JobNameSource{{Annotation: "example.com/job"}, {Env: "JOB"}}, custom.JobNameSources)
	assert.False(t, custom.Metrics.PaiContainerCount.Enabled)
	assert.True(t, custom.Metrics.PaiPodCount.Enabled)
	assert.False(t, custom.Events.K8sNodeSchedulableChanged.Enabled)
	assert.True(t, custom.Events.K8sPodPhaseChanged.Enabled)
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{"bad_auth_type", `auth_type: must be one of serviceAccount, kubeConfig; got "token"`},
		{"kubeconfig_with_service_account", "kubeconfig_path and context are only used with auth_type kubeConfig: remove them or set auth_type: kubeConfig"},
		{"missing_kubeconfig", `kubeconfig_path "testdata/no-such-kubeconfig" cannot be read: stat testdata/no-such-kubeconfig: no such file or directory`},
		{"zero_sync_timeout", "sync_timeout must be positive, got 0s"},
		{"zero_healthz_timeout", "healthz_timeout must be positive, got 0s"},
		{"healthz_timeout_above_interval", "healthz_timeout (20s) must not exceed collection_interval (10s): probes would queue up behind each other"},
		{"no_gpu_resources", "gpu_resource_names must list at least one resource, e.g. nvidia.com/gpu"},
		{"bad_gpu_resource", `gpu_resource_names: "gpu" is not an extended resource name like nvidia.com/gpu`},
		{"duplicate_gpu_resource", `gpu_resource_names lists "nvidia.com/gpu" twice, which would count its GPUs twice`},
		{"bad_service_label", `service_label "no spaces allowed" is not a valid label key: name part must consist of alphanumeric characters`},
		{"job_source_two_keys", "job_name_sources[0]: set exactly one of label, annotation or env"},
		{"job_source_empty", "job_name_sources[0]: set exactly one of label, annotation or env"},
		{"job_source_bad_env", `job_name_sources[0]: env "1BAD" is not a valid variable name: a valid environment variable name must consist of`},
		{"job_source_bad_label", `job_name_sources[0]: "-bad-" is not a valid label or annotation key: name part must consist of alphanumeric characters`},
		{"zero_interval", `"collection_interval": requires positive value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(configtest.Load[Config](t, NewFactory(), tt.name))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
