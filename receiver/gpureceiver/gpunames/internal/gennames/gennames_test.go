// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gennames

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSource(t *testing.T) {
	src, err := Source([]byte(`
resource_attributes:
  uuid: {description: The GPU's UUID.}
attributes:
  aaa_gpu_instance_id: {description: GPM's., name_override: gpu_instance_id}
  gpu_instance_id: {description: The GPU instance.}
  pipe: {description: The pipe., enum: [tensor, fp64]}
events:
  gpu.xid: {description: One XID.}
metrics:
  gpu_sm_active_percent: {description: "SM activity,\n  in percent."}
`))
	require.NoError(t, err)
	s := string(src)
	assert.Contains(t, s, "GPUSMActivePercent = \"gpu_sm_active_percent\"")
	assert.Contains(t, s, "// GPUSMActivePercent: SM activity, in percent.")
	assert.Contains(t, s, "EventGPUXID = \"gpu.xid\"")
	assert.Contains(t, s, "KeyUUID = \"uuid\"")
	assert.Contains(t, s, "// KeyGPUInstanceID: The GPU instance.\n\tKeyGPUInstanceID = \"gpu_instance_id\"", "the attribute of that name describes it")
	assert.Regexp(t, `PipeFP64 +=\s+"fp64"`, s)
	assert.NotContains(t, s, "KeyGPMGPUInstanceID", "a key is named by its name on the wire")
}

func TestSourceBadYAML(t *testing.T) {
	_, err := Source([]byte("metrics: [\n"))
	assert.ErrorContains(t, err, "metadata.yaml")
}
