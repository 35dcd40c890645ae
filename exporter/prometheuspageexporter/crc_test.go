// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCRC32CombineIsTheConcatenationsCRC(t *testing.T) {
	long := bytes.Repeat([]byte("gpu_temperature{uuid=\"GPU-a\"} 70\n"), 40_000) // past 2^20 bytes
	for _, c := range []struct{ a, b []byte }{
		{nil, nil}, {[]byte("a"), nil}, {nil, []byte("b")}, {[]byte("# TYPE x gauge\n"), []byte("x 1\n")}, {long, long[:777]}, {long[:3], long},
	} {
		want := crc32.ChecksumIEEE(append(bytes.Clone(c.a), c.b...))
		require.Equal(t, want, crc32Combine(crc32.ChecksumIEEE(c.a), crc32.ChecksumIEEE(c.b), len(c.b)), "%d+%d bytes", len(c.a), len(c.b))
	}
}

func FuzzCRC32Combine(f *testing.F) {
	f.Add([]byte("gpu_power 300\n"), []byte("gpu_temperature 70\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := crc32.ChecksumIEEE(append(bytes.Clone(a), b...))
		if got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), len(b)); got != want {
			t.Fatalf("combined %08x, the concatenation's %08x", got, want)
		}
	})
}
