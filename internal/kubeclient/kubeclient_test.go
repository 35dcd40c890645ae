// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kubeclient

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubeconfig = "testdata/kubeconfig"

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name     string
		settings Settings
		wantErr  string
	}{
		{"service account", Settings{AuthType: AuthTypeServiceAccount}, ""},
		{"kubeconfig", Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: kubeconfig, Context: "gpus"}, ""},
		{"default kubeconfig", Settings{AuthType: AuthTypeKubeConfig}, ""},
		{
			"kubeconfig with service account",
			Settings{AuthType: AuthTypeServiceAccount, KubeConfigPath: kubeconfig},
			"kubeconfig_path and context are only used with auth_type kubeConfig: remove them or set auth_type: kubeConfig",
		},
		{
			"context with service account",
			Settings{AuthType: AuthTypeServiceAccount, Context: "gpus"},
			"kubeconfig_path and context are only used with auth_type kubeConfig",
		},
		{
			"missing kubeconfig",
			Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: "testdata/none"},
			`kubeconfig_path "testdata/none" cannot be read: stat testdata/none: no such file or directory`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.settings.Check()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	assert.EqualError(t, AuthType("token").Validate(), `must be one of serviceAccount, kubeConfig; got "token"`)
}

func TestRESTConfig(t *testing.T) {
	rc, err := Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: kubeconfig}.RESTConfig("k8s_watchdog")
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:1", rc.Host)
	assert.Equal(t, "otelcol-gpu/k8s_watchdog", rc.UserAgent)

	_, err = Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: kubeconfig, Context: "missing"}.RESTConfig("x")
	assert.ErrorContains(t, err, `kubeconfig_path "testdata/kubeconfig", context "missing": context "missing" does not exist`)

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = Settings{AuthType: AuthTypeServiceAccount}.RESTConfig("x")
	assert.ErrorContains(t, err, "auth_type serviceAccount needs to run in a pod with a service account (set auth_type: kubeConfig outside the cluster)")
}

func TestNamespace(t *testing.T) {
	ns, err := Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: kubeconfig, Context: "gpus"}.Namespace()
	require.NoError(t, err)
	assert.Equal(t, "gpu-ops", ns)
	ns, err = Settings{AuthType: AuthTypeKubeConfig, KubeConfigPath: kubeconfig}.Namespace()
	require.NoError(t, err)
	assert.Equal(t, "default", ns, "a context without a namespace, as kubectl reads it")

	file := filepath.Join(t.TempDir(), "namespace")
	require.NoError(t, os.WriteFile(file, []byte("otelcol-gpu\n"), 0o600))
	defer func(old string) { serviceAccountNamespace = old }(serviceAccountNamespace)
	serviceAccountNamespace = file
	ns, err = Settings{AuthType: AuthTypeServiceAccount}.Namespace()
	require.NoError(t, err)
	assert.Equal(t, "otelcol-gpu", ns)

	serviceAccountNamespace = filepath.Join(t.TempDir(), "none")
	_, err = Settings{AuthType: AuthTypeServiceAccount}.Namespace()
	assert.ErrorContains(t, err, "auth_type serviceAccount: the pod's namespace: open ")
}
