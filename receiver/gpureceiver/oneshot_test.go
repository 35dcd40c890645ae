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
	"golang.org/x/sys/unix"
)

func lines(t *testing.T, text string) []string {
	t.Helper()
	var got []string
	require.NoError(t, eachLine(strings.NewReader(text), func(l string) { got = append(got, l) }))
	return got
}

func TestEachLine(t *testing.T) {
	assert.Equal(t, []string{"a\n", "b\n", "c"}, lines(t, "a\nb\nc"), "the last line needs no newline")
	assert.Empty(t, lines(t, ""))
	long := strings.Repeat("x", maxKmsgLine+10) + "\n"
	got := lines(t, long+"NVRM: Xid (PCI:0000:3b:00): 79, after\n")
	require.Len(t, got, 2, "an overlong line is cut, the next one kept")
	assert.Len(t, got[0], maxKmsgLine)
	assert.Equal(t, "NVRM: Xid (PCI:0000:3b:00): 79, after\n", got[1])
}

// /dev/kmsg answers EAGAIN at its end when opened O_NONBLOCK, as a FIFO with a writer does: the
// read since boot stops there instead of waiting for the next record.
func TestKernelLogSinceBootStopsAtEAGAIN(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that stays, as the kernel does
	require.NoError(t, err)
	defer w.Close()
	f, err := openNonblocking(fifo)
	require.NoError(t, err)
	defer f.Close()
	_, err = w.WriteString("6,1093,52473100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n4,1094,52473200,-;other\n")
	require.NoError(t, err)
	var got []kmsgXID
	require.NoError(t, eachLine(f, func(l string) {
		if x, ok := parseXIDLine(l); ok {
			got = append(got, x)
		}
	}))
	require.Len(t, got, 1)
	assert.Equal(t, uint64(79), got[0].code)
	assert.Equal(t, pciAddr{bus: 0x3b}, got[0].pci)
}

func FuzzEachLine(f *testing.F) {
	for _, seed := range []string{"", "a\nb", "\n\n", "NVRM: Xid (PCI:0000:3b:00): 79, x\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var b strings.Builder
		n := 0
		require.NoError(t, eachLine(strings.NewReader(text), func(l string) {
			n++
			if len(l) > maxKmsgLine {
				t.Fatalf("a line of %d bytes, over maxKmsgLine", len(l))
			}
			if i := strings.IndexByte(l, '\n'); i >= 0 && i != len(l)-1 {
				t.Fatalf("a line with a newline inside: %q", l)
			}
			b.WriteString(l)
		}))
		if len(text) <= maxKmsgLine && b.String() != text {
			t.Fatalf("the lines %q do not make up the text %q", b.String(), text)
		}
	})
}
