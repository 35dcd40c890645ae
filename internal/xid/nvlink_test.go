// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package xid

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// nvlinkLines are NVLink5 XID messages in the driver's format (as NVIDIA's XID catalog and
// reports from B200 nodes show them), after "<code>, ".
var nvlinkLines = []struct {
	code    uint64
	message string
	want    NVLink
}{
	{145, "RLW_REMAP Nonfatal XC0 i0 Link 02 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)", NVLink{Unit: "RLW_REMAP", Link: 2, Subcode: 4}},
	{149, "NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 0x00000000)", NVLink{Unit: "NETIR_LINK_DOWN", Fatal: true, Link: 3, Subcode: 0}},
	{144, "SAW_MVB Fatal XC1 i0 Link 17 (0x03f00001 0x00000002)", NVLink{Unit: "SAW_MVB", Fatal: true, Link: 17, Subcode: 0x3f}},
	{146, "TLW_RX_PIPE1 Nonfatal XC0 i0", NVLink{Unit: "TLW_RX_PIPE1", Link: -1, Subcode: -1}},
}

func TestParseNVLink(t *testing.T) {
	for _, tt := range nvlinkLines {
		got, ok := ParseNVLink(tt.code, tt.message)
		assert.True(t, ok, tt.message)
		assert.Equal(t, tt.want, got, tt.message)
	}
	assert.Equal(t, SeverityFatal, NVLink{Fatal: true}.Severity())
	assert.Equal(t, SeverityWarning, NVLink{}.Severity())
	for _, bad := range []struct {
		code    uint64
		message string
	}{
		{79, "RLW_REMAP Fatal XC0 i0 Link 02"},    // not an NVLink XID
		{143, "RLW_REMAP Fatal XC0"},              // just below the range
		{151, "RLW_REMAP Fatal XC0"},              // just above
		{145, "RLW_REMAP"},                        // no verdict
		{145, "RLW_REMAP fatal XC0 i0 Link 02"},   // the driver capitalizes its verdict
		{145, "pid=4242, name=python, RLW_REMAP"}, // another kind of message
		{145, ""},
	} {
		_, ok := ParseNVLink(bad.code, bad.message)
		assert.False(t, ok, "%d, %s", bad.code, bad.message)
	}
}

// FuzzParseNVLink: no input panics; what parses has its fields in range and parses the same
// when written back in the driver's format.
func FuzzParseNVLink(f *testing.F) {
	for _, tt := range nvlinkLines {
		f.Add(tt.code, tt.message)
	}
	f.Add(uint64(145), "X Fatal Link (0x Link 999 (0xffffffffff)")
	f.Fuzz(func(t *testing.T, code uint64, message string) {
		n, ok := ParseNVLink(code, message)
		if !ok {
			return
		}
		if n.Unit == "" || strings.ContainsAny(n.Unit, " \t\n") || n.Link < -1 || n.Link > 255 || n.Subcode < -1 || n.Subcode > subcodeMask {
			t.Fatalf("out of range: %+v from %q", n, message)
		}
		verdict := "Nonfatal"
		if n.Fatal {
			verdict = "Fatal"
		}
		line := n.Unit + " " + verdict + " XC0 i0"
		if n.Link >= 0 {
			line += fmt.Sprintf(" Link %02d", n.Link)
		}
		if n.Subcode >= 0 {
			line += fmt.Sprintf(" (0x%08x)", n.Subcode<<subcodeShift)
		}
		if again, ok := ParseNVLink(code, line); !ok || again != n {
			t.Fatalf("round trip of %q: %+v became %+v (%v)", message, n, again, ok)
		}
	})
}
