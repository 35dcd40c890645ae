// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package recoveryaction

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
)

// TestNumbersAreNVMLs: each action has go-nvml's number for it, so a value read from field 230
// converts by number.
func TestNumbersAreNVMLs(t *testing.T) {
	nvmlValues := []nvml.DeviceGpuRecoveryAction{
		nvml.GPU_RECOVERY_ACTION_NONE, nvml.GPU_RECOVERY_ACTION_GPU_RESET, nvml.GPU_RECOVERY_ACTION_NODE_REBOOT,
		nvml.GPU_RECOVERY_ACTION_DRAIN_P2P, nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET, nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN,
		nvml.GPU_RECOVERY_ACTION_BUS_RESET, nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT,
	}
	assert.Len(t, All, len(nvmlValues))
	for i, v := range nvmlValues {
		assert.Equal(t, Action(v), All[i])
	}
}

func TestNamesAndWords(t *testing.T) {
	assert.Equal(t, "node_reboot", NodeReboot.String())
	assert.Equal(t, "node reboot", NodeReboot.Words())
	assert.Equal(t, []string{"none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset", "recover_imex_domain", "bus_reset", "system_reboot"}, Names())
	for _, a := range All {
		got, ok := Parse(a.String())
		assert.True(t, ok, a.String())
		assert.Equal(t, a, got)
		assert.True(t, a.Known())
	}
	_, ok := Parse("reboot")
	assert.False(t, ok)
	// A value a newer driver added is named by its number, never taken for a known one.
	assert.False(t, Action(8).Known())
	assert.Equal(t, "unknown_8", Action(8).String())
	assert.Contains(t, Action(8).Words(), "8")
}
