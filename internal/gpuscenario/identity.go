// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// derivedUUID derives a GPU UUID from the seed and index, so series keep their identity from
// one run to the next.
func derivedUUID(seed int64, index int) string {
	var in [16]byte
	binary.LittleEndian.PutUint64(in[:8], uint64(seed))
	binary.LittleEndian.PutUint64(in[8:], uint64(index))
	h := sha256.Sum256(in[:])
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
