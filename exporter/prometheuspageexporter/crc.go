// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import "hash/crc32"

// A page's gzip trailer needs the CRC-32 of its whole text, which no one holds: each piece
// keeps its own CRC, and the view combines them. Feeding zero bytes through a CRC-32 register
// is linear, so CRC(A followed by B) = Z(CRC(A)) xor CRC(B), where Z feeds len(B) zero bytes
// (the pre- and post-inversion cancel out); Z is applied in O(log len(B)) steps as products of
// the operators of 2^k zero bytes.

// zeroBytes[k] feeds 2^k zero bytes through the register: column i is what bit i becomes.
var zeroBytes = func() (ops [63][32]uint32) {
	for i := range 32 {
		// crc32.Update inverts the register before and after; undone here.
		ops[0][i] = ^crc32.Update(^uint32(1<<i), crc32.IEEETable, []byte{0})
	}
	for k := 1; k < len(ops); k++ {
		for i := range 32 {
			ops[k][i] = applyOperator(&ops[k-1], ops[k-1][i])
		}
	}
	return ops
}()

func applyOperator(op *[32]uint32, x uint32) uint32 {
	var y uint32
	for i := 0; x != 0; i, x = i+1, x>>1 {
		if x&1 != 0 {
			y ^= op[i]
		}
	}
	return y
}

// crc32Combine is the CRC-32 (IEEE) of A followed by B, from A's CRC, B's and B's length.
func crc32Combine(crcA, crcB uint32, lenB int) uint32 {
	for k := 0; lenB > 0; k, lenB = k+1, lenB>>1 {
		if lenB&1 != 0 {
			crcA = applyOperator(&zeroBytes[k], crcA)
		}
	}
	return crcA ^ crcB
}
