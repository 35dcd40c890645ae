// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuilt(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBE_CACHE_DIR", cache)
	t.Setenv("KUBE_CONTROLLER_MANAGER_BIN", "")
	_, err := Built("kube-controller-manager")
	assert.ErrorContains(t, err, "build it with test/kube/build-apiserver.sh kube-controller-manager")
	assert.ErrorContains(t, err, "KUBE_CONTROLLER_MANAGER_BIN")

	// Where build-apiserver.sh puts it.
	cached := filepath.Join(cache, "kube-controller-manager-"+KubeVersion, "kube-controller-manager")
	require.NoError(t, os.MkdirAll(filepath.Dir(cached), 0o755))
	require.NoError(t, os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o700)) //nolint:gosec // G306: it stands for an executable
	bin, err := Built("kube-controller-manager")
	require.NoError(t, err)
	assert.Equal(t, cached, bin)

	// The variable wins, and must name an executable.
	other := filepath.Join(t.TempDir(), "kcm")
	require.NoError(t, os.WriteFile(other, nil, 0o600))
	t.Setenv("KUBE_CONTROLLER_MANAGER_BIN", other)
	_, err = Built("kube-controller-manager")
	assert.ErrorContains(t, err, "not an executable")
	require.NoError(t, os.Chmod(other, 0o755))
	bin, err = Built("kube-controller-manager")
	require.NoError(t, err)
	assert.Equal(t, other, bin)
}
