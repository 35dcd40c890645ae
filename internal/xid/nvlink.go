// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package xid // import "github.com/otelcol-gpu/otelcol-gpu/internal/xid"

import (
	"strconv"
	"strings"
)

// NVLink5 XIDs (144-150, Blackwell) share one code per NVLink unit; the kernel log line says
// which error of the unit it was and how bad it is:
//
//	NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02 (0x004505c6 0x00000000 ...)
//
// after the code come the unit's error mnemonic, the driver's verdict ("Fatal" or "Nonfatal"),
// the exception class and instance, the link, and the interrupt info words. NVIDIA's XID catalog
// (docs.nvidia.com/deploy/xid-errors, "NVLink5 Xids") classifies each by its subcode (bits 20-25
// of the first info word) and error status; the driver prints the outcome as the verdict, which
// is what is read here: a Nonfatal line is recovered in hardware and stays a warning, a Fatal one
// takes the GPU's NVLink down until a reset. NVML's XID events carry the code only, so an XID
// seen through NVML alone keeps the table's severity.

// NVLink XID codes.
const (
	firstNVLink = 144
	lastNVLink  = 150
)

// NVLink is what an NVLink XID's kernel log message says.
type NVLink struct {
	// Unit is the error mnemonic, e.g. RLW_REMAP.
	Unit  string
	Fatal bool
	// Link is the link number, -1 when the line has none.
	Link int
	// Subcode is bits 20-25 of the first interrupt info word, -1 when the line has none.
	Subcode int
}

// subcode is where the catalog's subcode sits in the first interrupt info word.
const (
	subcodeShift = 20
	subcodeMask  = 0x3f
)

// ParseNVLink reads the message of an NVLink XID (what follows "<code>, " in the kernel log
// line). It reports false for other codes and for messages without a verdict.
func ParseNVLink(code uint64, message string) (NVLink, bool) {
	if code < firstNVLink || code > lastNVLink {
		return NVLink{}, false
	}
	fields := strings.Fields(message)
	if len(fields) < 2 {
		return NVLink{}, false
	}
	n := NVLink{Unit: fields[0], Link: -1, Subcode: -1}
	switch fields[1] {
	case "Fatal":
		n.Fatal = true
	case "Nonfatal":
	default:
		return NVLink{}, false
	}
	for i := 2; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "Link" && i+1 < len(fields):
			if l, err := strconv.ParseUint(fields[i+1], 10, 8); err == nil {
				n.Link = int(l)
			}
		case strings.HasPrefix(f, "(0x") && n.Subcode < 0:
			if w, err := strconv.ParseUint(strings.TrimSuffix(f[3:], ")"), 16, 32); err == nil {
				n.Subcode = int(w >> subcodeShift & subcodeMask)
			}
		}
	}
	return n, true
}

// Severity is the severity of an NVLink XID line: fatal as the driver says, else a warning.
func (n NVLink) Severity() Severity {
	if n.Fatal {
		return SeverityFatal
	}
	return SeverityWarning
}
