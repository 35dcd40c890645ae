// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789", 1000) // larger than any first buffer
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "small"), []byte("42\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))

	var r Reader
	b, err := r.ReadFile(dir, "big")
	require.NoError(t, err)
	assert.Equal(t, big, string(b))
	b, err = r.ReadFile(dir, "/small") // a part's own slash is harmless
	require.NoError(t, err)
	assert.Equal(t, "42\n", string(b), "a shorter file after a longer one")
	b, err = r.ReadFile(dir, "empty")
	require.NoError(t, err)
	assert.Empty(t, b)

	_, err = r.ReadFile(dir, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.EqualError(t, err, "open "+dir+"/missing: no such file or directory")
	_, err = r.ReadFile(dir)
	assert.Error(t, err, "a directory is not a file")
}

func TestReadlink(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 300) // longer than the first buffer
	require.NoError(t, os.Symlink("net:[4026531992]", filepath.Join(dir, "net")))
	require.NoError(t, os.Symlink(long, filepath.Join(dir, "long")))

	var r Reader
	b, err := r.Readlink(dir, "net")
	require.NoError(t, err)
	assert.Equal(t, "net:[4026531992]", string(b))
	b, err = r.Readlink(dir, "long")
	require.NoError(t, err)
	assert.Equal(t, long, string(b))
	_, err = r.Readlink(dir, "missing")
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestReadsDoNotAllocate: once the buffers have grown, a read allocates nothing, whatever the
// length of the path.
func TestReadsDoNotAllocate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 200))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.stat"), []byte("anon 1\nfile 2\n"), 0o600))
	require.NoError(t, os.Symlink("net:[1]", filepath.Join(dir, "net")))
	var r Reader
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = r.ReadFile(dir, "memory.stat")
		_, _ = r.Readlink(dir, "net")
		_ = r.Subdirs(func([]byte) error { return nil }, dir)
	})
	assert.Zero(t, allocs)
}

func TestSubdirs(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 { // more entries than one getdents call returns
		name := fmt.Sprintf("dir%03d", i)
		want = append(want, name)
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d", i)), nil, 0o600))
	}
	require.NoError(t, os.Symlink("dir000", filepath.Join(dir, "link")))

	var r Reader
	var got []string
	require.NoError(t, r.Subdirs(func(name []byte) error {
		got = append(got, string(name))
		return nil
	}, dir))
	slices.Sort(got)
	assert.Equal(t, want, got, "directories only: no files, no symbolic links, no . or ..")

	stop := errors.New("stop")
	assert.ErrorIs(t, r.Subdirs(func([]byte) error { return stop }, dir), stop)
	assert.ErrorIs(t, r.Subdirs(func([]byte) error { return nil }, dir, "missing"), fs.ErrNotExist)
	assert.Error(t, r.Subdirs(func([]byte) error { return nil }, dir, "file000"), "a file is not a directory")
}
