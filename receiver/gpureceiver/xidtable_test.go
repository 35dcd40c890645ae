// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

func TestLookupXID(t *testing.T) {
	assert.Equal(t, XIDInfo{Meaning: "GPU has fallen off the bus", Severity: "fatal", Resolution: "reboot",
		Action: resolutionActions[resolveReboot]}, LookupXID(79))
	assert.Equal(t, XIDInfo{Meaning: unknownXID.meaning, Severity: "warning", Resolution: "unknown",
		Action: resolutionActions[metadata.AttributeXidResolutionUnknown]}, LookupXID(4242))
	assert.Equal(t, resolutionActions[resolveResetGPU], ResolutionAction("reset_gpu"))
	assert.Empty(t, ResolutionAction("no_such_class"))
}
