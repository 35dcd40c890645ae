// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// TestDistroScenarios keeps the shipped scenarios (the simulated backend's, and make demo-amd's
// AMD node) and the demo's gpu receiver valid; `make demo` runs from the repository root, so the
// test does too.
func TestDistroScenarios(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	files, err := filepath.Glob(filepath.Join("distro", "scenarios", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		_, err = gpuscenario.Load(f) // NVIDIA's play in the simulated backend, AMD's in demonode's files
		require.NoError(t, err, f)
	}

	cm, err := confmaptest.LoadConf(filepath.Join("distro", "demo.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("receivers::gpu")
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	require.Equal(t, BackendSimulated, cfg.Backend)
}
