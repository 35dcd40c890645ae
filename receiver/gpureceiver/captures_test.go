// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureLines is a real kernel log of testdata/captures (SOURCE.md names its source), by line.
func captureLines(tb testing.TB, name string) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "captures", name))
	require.NoError(tb, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestXIDCaptures: of a real node's dmesg around a GSP timeout, exactly its five XID lines are
// read, each whole; the driver's other NVRM lines about the same GPU (its RPC history, the rate
// limiting notice naming its PCI address) and a /dev/kmsg stream without XIDs give none.
func TestXIDCaptures(t *testing.T) {
	gpu := pciAddr{0, 0x9b, 0}
	var got []kmsgXID
	for _, line := range captureLines(t, "dmesg-with-xid-119.log") {
		if x, ok := parseXIDLine(line); ok {
			got = append(got, x)
		}
	}
	const timeout = "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function "
	assert.Equal(t, []kmsgXID{
		{gpu, 119, "pid=2024380, name=nvidia-smi, " + timeout + "103 (GSP_RM_ALLOC) (0x2081 0x4)."},
		{gpu, 119, "pid=2024380, name=nvidia-smi, " + timeout + "10 (FREE) (0xa55a0210 0x0)."},
		{gpu, 119, "pid=2024380, name=nvidia-smi, " + timeout + "10 (FREE) (0xa55a0090 0x0)."},
		{gpu, 119, "pid=1263500, name=cache_mgr_main, " + timeout + "76 (GSP_RM_CONTROL) (0x20801813 0x4c)."},
		{gpu, 119, "pid=1240590, name=gpud, " + timeout + "76 (GSP_RM_CONTROL) (0x20803032 0x58c)."},
	}, got)

	for _, line := range captureLines(t, "kmsg.1.log") {
		_, ok := parseXIDLine(line)
		assert.False(t, ok, line)
	}
}
