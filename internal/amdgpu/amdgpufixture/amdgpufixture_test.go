// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
)

// TestRewrite writes a node, then new values over it, as a demo does over time: the reader
// sees the new values, and a reading taken away is gone.
func TestRewrite(t *testing.T) {
	root := t.TempDir()
	n := MI300X()
	require.NoError(t, Write(root, n))
	r := amdgpu.Reader{Root: root}
	devices, errs := r.Devices()
	require.Empty(t, errs)
	require.Len(t, devices, 8)
	assert.InDelta(t, 10.0, *amdgpu.ReadGPU(devices[1].DeviceDir).BusyPercent, 0)

	n.GPUs[1].BusyPercent = 99
	n.GPUs[1].LinkWidth = 4
	n.GPUs[1].RAS["umc"] = amdgpu.ErrcountRAS{Uncorrected: 2}
	n.GPUs[1].Missing = []string{"gpu_metrics"}
	require.NoError(t, Write(root, n))
	s := amdgpu.ReadGPU(devices[1].DeviceDir)
	require.Empty(t, s.Errors)
	assert.InDelta(t, 99.0, *s.BusyPercent, 0)
	assert.Equal(t, 4, *s.LinkWidth)
	assert.Equal(t, uint64(2), s.RAS["umc"].Uncorrected)
	assert.Nil(t, s.Metrics)
}

// TestNodes checks what each node's description promises the readers.
func TestNodes(t *testing.T) {
	for name, tt := range map[string]struct {
		node    Node
		devices int
		model   string
		edge    bool
		rev     amdgpu.Revision
	}{
		"mi300x":     {MI300X(), 8, "AMD Instinct MI300X OAM", false, amdgpu.Revision{Format: 1, Content: 7}},
		"mi300x-cpx": {MI300XCPX(8), 64, "AMD Instinct MI300X OAM", false, amdgpu.Revision{Format: 1, Content: 7}},
		"mi250x":     {MI250X(), 8, "AMD Instinct MI250X", true, amdgpu.Revision{Format: 1, Content: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, Write(root, tt.node))
			r := amdgpu.Reader{Root: root}
			assert.True(t, r.Present())
			devices, errs := r.Devices()
			require.Empty(t, errs)
			assert.Len(t, devices, tt.devices)
			s := amdgpu.ReadGPU(devices[0].DeviceDir)
			require.Empty(t, s.Errors)
			assert.Equal(t, tt.model, s.Model())
			assert.Equal(t, tt.edge, s.Hwmon.EdgeCelsius != nil)
			require.NotNil(t, s.Metrics)
			assert.Equal(t, tt.rev, s.Metrics.Revision)
		})
	}
}
