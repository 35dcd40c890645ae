// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfile // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ReadLimited reads a whole file of at most limit bytes. It is for the files of a node's daemons
// and drivers (CDI specs, a driver's /proc entries) that nothing else bounds: one grown past
// reason is refused, not read whole into memory.
func ReadLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than %d bytes", limit)}
	}
	return data, nil
}
