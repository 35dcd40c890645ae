// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLookupXID(t *testing.T) {
	assert.Equal(t, XIDInfo{Meaning: "GPU has fallen off the bus", Severity: "fatal", Action: actionReboot}, LookupXID(79))
	assert.Equal(t, XIDInfo{Meaning: unknownXID.meaning, Severity: "warning", Action: actionUnknown}, LookupXID(4242))
}
