// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
)

// captures holds control files of real machines that Telegraf published for its cgroup input
// (testdata/captures/SOURCE.md names each).
const captures = "testdata/captures"

func capture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, rel))
	require.NoError(t, err)
	return b
}

// TestV2Captures reads a container whose control files are a real v2 cgroup's.
func TestV2Captures(t *testing.T) {
	mount := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mount, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o600))
	dir := filepath.Join(mount, containerPath)
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(captures, "v2"))))
	h, err := cgroupfs.NewHierarchy(mount)
	require.NoError(t, err)
	require.Equal(t, cgroupfs.V2, h.Version())

	st, err := h.Stat(containerPath)
	require.NoError(t, err)
	assert.Equal(t, cgroupfs.Stats{
		CPUOK: true, CPUSeconds: float64(98701325189) / 1e6,
		MemoryOK: true, MemoryUsage: 13071106048, InactiveFile: 2935459840, MemoryLimit: 103079215104,
		IOOK: true, ReadBytes: 74526720, WriteBytes: 3789381632,
	}, st)
}

func TestV1Captures(t *testing.T) {
	v, err := cgroupfs.SingleValue(capture(t, "v1/memory.usage_in_bytes"))
	require.NoError(t, err)
	assert.Equal(t, uint64(3513667584), v)

	// The scheduler's file of a kernel without CFQ: a Total line and no device.
	r, w, entries, err := cgroupfs.ParseBlkio(capture(t, "v1/blkio.io_serviced"))
	require.NoError(t, err)
	assert.Equal(t, [3]uint64{0, 0, 0}, [3]uint64{r, w, uint64(entries)})

	// 26 devices (sr0, sda, eight loops, sixteen ramdisks) of 5 lines each (Read, Write, Sync,
	// Async, Total), then the Total line.
	r, w, entries, err = cgroupfs.ParseBlkio(capture(t, "v1/blkio.throttle.io_serviced"))
	require.NoError(t, err)
	assert.Equal(t, [3]uint64{49134 + 16*3, 216703, 130}, [3]uint64{r, w, uint64(entries)})
}

// TestV1BlkioCapturesFallBack: the real files (io_serviced has io_service_bytes' layout, with
// counts for bytes) in the places of io_service_bytes_recursive and throttle.io_service_bytes:
// the empty scheduler's file sends the read to the throttle file.
func TestV1BlkioCapturesFallBack(t *testing.T) {
	mount := host(t, 1)
	dir := filepath.Join(mount, "blkio", containerPath)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blkio.io_service_bytes_recursive"), capture(t, "v1/blkio.io_serviced"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blkio.throttle.io_service_bytes"), capture(t, "v1/blkio.throttle.io_serviced"), 0o600))
	h, err := cgroupfs.NewHierarchy(mount)
	require.NoError(t, err)
	st, err := h.Stat(containerPath)
	require.NoError(t, err)
	assert.True(t, st.IOOK)
	assert.Equal(t, [2]uint64{49182, 216703}, [2]uint64{st.ReadBytes, st.WriteBytes})
}
