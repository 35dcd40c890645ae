// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
)

// TestDriverRecoveryAction: a GPU's faults take their action from the driver when it asks for
// one (a driver-said reboot is a reboot, even for an XID classed as a reset), and the words name
// the driver as the source; ours otherwise: when the driver asks for nothing, on another GPU, and
// once it asks for nothing again.
func TestDriverRecoveryAction(t *testing.T) {
	j, _ := testJudge(t, nil)
	n, _ := j.node("n1")
	g, h := gpuOn("n1", 2), gpuOn("n1", 5)

	j.consumeLogs(g.xids(t0, 48, "reset_gpu", "fatal", 1))
	assert.Empty(t, j.consumeMetrics(g.recoveryAction(t0, recoveryaction.None)), "none: nothing changes")
	v := n.verdict()
	assert.Equal(t, ActionResetGPU, v.action, "ours")
	assert.NotContains(t, v.message(), "driver")
	pendingCounts(j, "n1")

	// The driver asks for a reboot: the XID's class is the driver's.
	assert.Equal(t, []string{"n1"}, j.consumeMetrics(g.recoveryAction(t0.Add(time.Second), recoveryaction.NodeReboot)))
	v = n.verdict()
	assert.Equal(t, ActionReboot, v.action)
	assert.Contains(t, v.message(), "GPU 2 (GPU-n1-2): XID 48, meaning of 48 (driver recovery action: node reboot)")

	// A new occurrence's Event says so too.
	j.consumeLogs(g.xids(t0.Add(2*time.Second), 48, "reset_gpu", "fatal", 1))
	j.mu.Lock()
	pending := n.takePending()
	j.mu.Unlock()
	require.Len(t, pending, 1)
	assert.Equal(t, ActionReboot, pending[0].f.action)
	assert.Contains(t, pending[0].f.describe(), "driver recovery action: node reboot")

	// Another GPU's fault keeps our class; an older sample of the driver changes nothing.
	j.consumeLogs(h.xids(t0.Add(3*time.Second), 48, "reset_gpu", "fatal", 1))
	assert.Empty(t, j.consumeMetrics(g.recoveryAction(t0, recoveryaction.None)), "older than the latest sample")
	j.mu.Lock()
	for _, f := range n.open() {
		if f.gpu == h.uuid {
			assert.Equal(t, ActionResetGPU, f.action, "GPU 5's driver asked for nothing")
		} else {
			assert.Equal(t, ActionReboot, f.action)
		}
	}
	j.mu.Unlock()

	// The driver asks for nothing again: ours.
	assert.Equal(t, []string{"n1"}, j.consumeMetrics(g.recoveryAction(t0.Add(4*time.Second), recoveryaction.None)))
	v = n.verdict()
	assert.Equal(t, ActionResetGPU, v.action)
	assert.NotContains(t, v.message(), "driver")
}

// TestDriverRecoveryActionClasses: each of the driver's actions has its class; a value a newer
// driver added leaves ours.
func TestDriverRecoveryActionClasses(t *testing.T) {
	for action, want := range map[recoveryaction.Action]Action{
		recoveryaction.None: ActionResetGPU, recoveryaction.GPUReset: ActionResetGPU, recoveryaction.NodeReboot: ActionReboot,
		recoveryaction.DrainP2P: ActionCheckNVLink, recoveryaction.DrainAndReset: ActionResetGPU,
		recoveryaction.RecoverIMEXDomain: ActionCheckNVLink, recoveryaction.BusReset: ActionResetGPU,
		recoveryaction.SystemReboot: ActionReboot, recoveryaction.Action(8): ActionResetGPU,
	} {
		f := &fault{action: ActionResetGPU}
		f.takeDriver(action)
		assert.Equal(t, want, f.action, action.String())
	}
}
