// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCaptures reads the specs that the CDI project and NVIDIA's toolkit publish
// (testdata/captures/SOURCE.md names each) from a host's /etc/cdi, as a node would hold them.
func TestCaptures(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "cdi")
	for i, capture := range []string{
		"cdi-schema/good/minimal.json", "cdi-schema/good/spec-example.json",
		"nvidia-ctk/generate-default.yaml", "nvidia-ctk/management.yaml", "nvidia-ctk/imex-channels.yaml",
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "captures", capture))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		// One file name each: the schema's two examples declare the same kind.
		name := filepath.Join(dir, string(rune('a'+i))+"-"+filepath.Base(capture))
		require.NoError(t, os.WriteFile(name, data, 0o600))
	}
	devices, err := NewReader(root, DefaultSpecDirs).Read()
	require.NoError(t, err)
	imex := []string{"/dev/nvidia-caps-imex-channels/channel0", "/dev/nvidia-caps-imex-channels/channel1", "/dev/nvidia-caps-imex-channels/channel2047"}
	assert.Equal(t, Devices{
		// spec-example.json, read after minimal.json, declares the same device again.
		"vendor.com/device=myDevice": {"/dev/card1", "/dev/card2"},
		// generate-default.yaml's "0" and "all"; management.yaml, read after it, redeclares "all"
		// (the management spec: every node of the driver in one device).
		"example.com/device=0":         {"/dev/nvidia0"},
		"example.com/device=all":       append(append([]string{"/dev/nvidia0", "/dev/nvidiactl"}, imex...), "/dev/nvidia-caps/nvidia-cap1"),
		"nvidia.com/imex-channel=0":    imex[:1],
		"nvidia.com/imex-channel=1":    imex[1:2],
		"nvidia.com/imex-channel=2047": imex[2:],
	}, devices)
}

// TestBadCaptures: the CDI schema's examples of invalid specs are refused, saying why.
func TestBadCaptures(t *testing.T) {
	for file, want := range map[string]string{
		"empty.json":          "unexpected end of JSON input",
		"explicit-empty.json": `kind "" is not vendor/class`,
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "captures", "cdi-schema", "bad", file))
		require.NoError(t, err)
		_, err = Parse(data, true)
		assert.EqualError(t, err, want, file)
	}
}
