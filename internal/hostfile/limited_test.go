// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte("12345"), 0o600))
	data, err := ReadLimited(path, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(data))
	_, err = ReadLimited(path, 4)
	assert.EqualError(t, err, "read "+path+": more than 4 bytes")
	_, err = ReadLimited(path+".absent", 4)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
