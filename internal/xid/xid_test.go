// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package xid

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLookup(t *testing.T) {
	assert.Equal(t, Info{Meaning: "GPU has fallen off the bus", Severity: "fatal", Resolution: "reboot"}, Lookup(79))
	assert.Equal(t, actions[ResolutionReboot], Lookup(79).ActionText())
	assert.Equal(t, Info{Meaning: unknown.Meaning, Severity: "warning", Resolution: "unknown"}, Lookup(4242))
	assert.Equal(t, actions[ResolutionUnknown], Lookup(4242).ActionText())
	assert.Equal(t, actions[ResolutionResetGPU], Resolution("reset_gpu").Action())
	assert.Empty(t, Resolution("no_such_class").Action())
}

// TestShippedEntries: every shipped entry says what the code means, how bad it is, and what to
// do; the codes the reference tools disagree on are present.
func TestShippedEntries(t *testing.T) {
	for code, info := range shipped {
		assert.NotEmpty(t, info.Meaning, "meaning of XID %d", code)
		assert.NotEmpty(t, info.ActionText(), "action of XID %d", code)
		assert.NotEqual(t, ResolutionUnknown, info.Resolution, "resolution of XID %d", code)
		assert.Contains(t, Severities, info.Severity, "severity of XID %d", code)
	}
	for _, disputed := range []uint64{13, 43, 68, 92, 109} {
		assert.Contains(t, shipped, disputed)
	}
	assert.Equal(t, SeverityFatal, shipped[79].Severity)
}

func TestEveryResolutionIsWorded(t *testing.T) {
	for _, r := range Resolutions {
		assert.NotEmpty(t, r.Action(), r)
	}
}
