// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// One collection is judged at once: a state whose `for` is minutes (a hung GPU: 2m) is a fault
// already, XIDs count by class, and the faults come in the condition's order.
func TestJudgeCollection(t *testing.T) {
	now := time.Now()
	g := gpuOn("gpu-node-07", 3)
	md := g.health(now, map[string]int64{"nvml": 1, "memory_ecc": 1})
	gpuCountOf("gpu-node-07", now, 7, 8).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	ld := g.xids(now, 48, "reset_gpu", "fatal", 1)
	g.xids(now, 13, "restart_app", "warning", 1).ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())

	faults := JudgeCollection(md, ld, nil)
	kinds := make([]string, len(faults))
	for i, f := range faults {
		kinds[i] = f.Kind
	}
	assert.Equal(t, []string{"xid", "gpu_missing", "driver_hang", "double_bit_ecc"}, kinds, "restart_app is not the writer's default")
	require.NotEmpty(t, faults)
	x := faults[0]
	assert.Equal(t, uint64(48), x.XID)
	assert.Equal(t, ActionResetGPU, x.Action)
	assert.Equal(t, "3", x.Minor)
	assert.Equal(t, g.uuid, x.GPU)
	assert.Equal(t, "XIDError", x.Reason)
	assert.NotEmpty(t, x.ActionWords)

	faults = JudgeCollection(md, ld, []xid.Resolution{xid.ResolutionRestartApp})
	require.NotEmpty(t, faults)
	assert.Equal(t, uint64(13), faults[0].XID, "the classes given replace the default")
}
