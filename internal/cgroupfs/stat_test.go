// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

const (
	podPath       = "/kubepods/burstable/pod8d6d4f1e-1d5a-4a3c-9f3e-2b1c0a9e7d11/"
	containerPath = podPath + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sandboxID     = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	sandboxPath   = podPath + sandboxID
)

func host(tb testing.TB, version int) (mount string) {
	root := filepath.Join(tb.TempDir(), "host")
	require.NoError(tb, hostfixture.Write(root, hostfixture.Host{CgroupVersion: version, Pods: []hostfixture.Pod{{
		Sandbox: &hostfixture.Sandbox{ID: sandboxID, PID: 98},
		Containers: []hostfixture.Container{{
			CgroupPath: containerPath,
			Processes:  []hostfixture.Process{{PID: 100, Comm: "python3", State: "S"}, {PID: 101, Comm: "python3", State: "S"}},
			ExitedPIDs: []int{99},
			CPUUsec:    2_500_000, MemUsage: 1 << 30, MemLimit: 4 << 30, InactiveFile: 1 << 20, ReadBytes: 4096, WriteBytes: 8192,
		}},
	}}}))
	return filepath.Join(root, "sys/fs/cgroup")
}

func TestHierarchy(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			h, err := cgroupfs.NewHierarchy(host(t, version))
			require.NoError(t, err)
			assert.Equal(t, cgroupfs.Version(version), h.Version())
			found, err := h.FindContainers()
			require.NoError(t, err)
			require.Len(t, found, 2, "the app container and the pod's sandbox")
			assert.Equal(t, containerPath, found[0].Path)
			assert.Equal(t, sandboxPath, found[1].Path)

			pids, err := h.Processes(found[0].Path, make([]int, 5))
			require.NoError(t, err)
			assert.Equal(t, []int{99, 100, 101}, pids, "every listed pid, the slice passed in reused")

			st, err := h.Stat(found[0].Path)
			require.NoError(t, err)
			assert.Equal(t, cgroupfs.Stats{
				CPUOK: true, CPUSeconds: 2.5,
				MemoryOK: true, MemoryUsage: 1 << 30, InactiveFile: 1 << 20, MemoryLimit: 4 << 30,
				IOOK: true, ReadBytes: 4096, WriteBytes: 8192,
			}, st)
		})
	}
}

// TestProcessesOfNestedCgroups: processes in cgroups below the container's (systemd in the
// container, kube-proxy's own) are the container's; a nested cgroup removed meanwhile costs nothing.
func TestProcessesOfNestedCgroups(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			mount := host(t, version)
			dir := filepath.Join(mount, containerPath)
			if version == 1 {
				dir = filepath.Join(mount, "memory", containerPath)
			}
			for nested, procs := range map[string]string{"init.scope": "200\n", "system.slice/job.service": "201\n202\n", "system.slice": ""} {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, nested), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, nested, "cgroup.procs"), []byte(procs), 0o600))
			}
			require.NoError(t, os.Mkdir(filepath.Join(dir, "gone"), 0o755)) // removed: no cgroup.procs
			h, err := cgroupfs.NewHierarchy(mount)
			require.NoError(t, err)
			pids, err := h.Processes(containerPath, nil)
			require.NoError(t, err)
			assert.ElementsMatch(t, []int{99, 100, 101, 200, 201, 202}, pids)

			require.NoError(t, os.WriteFile(filepath.Join(dir, "init.scope", "cgroup.procs"), []byte("x\n"), 0o600))
			_, err = h.Processes(containerPath, nil)
			assert.EqualError(t, err, `cgroup.procs: bad pid "x"`)

			_, err = h.Processes(podPath+strings.Repeat("cd", 32), nil)
			assert.ErrorIs(t, err, os.ErrNotExist, "a container that is gone")
		})
	}
}

// TestStatKeepsReadableControllers: one controller that cannot be read costs only its fields.
func TestStatKeepsReadableControllers(t *testing.T) {
	for _, tt := range []struct {
		version int
		file    string
	}{{1, "memory" + containerPath + "/memory.stat"}, {2, containerPath[1:] + "/memory.stat"}} {
		t.Run("v"+strconv.Itoa(tt.version), func(t *testing.T) {
			mount := host(t, tt.version)
			require.NoError(t, os.WriteFile(filepath.Join(mount, tt.file), []byte("anon 1\n"), 0o600))
			h, err := cgroupfs.NewHierarchy(mount)
			require.NoError(t, err)
			st, err := h.Stat(containerPath)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "memory: memory.stat: no ")
			assert.False(t, st.MemoryOK)
			assert.True(t, st.CPUOK)
			assert.True(t, st.IOOK)
			assert.Equal(t, 2.5, st.CPUSeconds)
			assert.Equal(t, uint64(8192), st.WriteBytes)
		})
	}
}

// TestV1BlkioFallsBackToThrottle: devices without CFQ/BFQ leave io_service_bytes_recursive empty.
func TestV1BlkioFallsBackToThrottle(t *testing.T) {
	mount := host(t, 1)
	dir := filepath.Join(mount, "blkio", containerPath)
	h, err := cgroupfs.NewHierarchy(mount)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "blkio.io_service_bytes_recursive"), []byte("Total 0\n"), 0o600))
	st, err := h.Stat(containerPath)
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{4096, 8192}, [2]uint64{st.ReadBytes, st.WriteBytes}, "the throttle file's")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "blkio.io_service_bytes_recursive"), []byte("8:0 Read 1\n8:0 Write 2\n8:16 Read 10\n8:16 Write 20\nTotal 33\n"), 0o600))
	st, err = h.Stat(containerPath)
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{11, 22}, [2]uint64{st.ReadBytes, st.WriteBytes}, "the scheduler's, summed over devices")
}

// TestStatDoesNotAllocate: a collection reads these files for every container.
func TestStatDoesNotAllocate(t *testing.T) {
	for _, version := range []int{1, 2} {
		h, err := cgroupfs.NewHierarchy(host(t, version))
		require.NoError(t, err)
		pids := make([]int, 0, 4)
		allocs := testing.AllocsPerRun(20, func() {
			pids, _ = h.Processes(containerPath, pids)
			_, _ = h.Stat(containerPath)
		})
		assert.Zero(t, allocs, "cgroup v%d", version)
	}
}

func TestParsers(t *testing.T) {
	v, err := cgroupfs.SingleValue([]byte("max\n"))
	assert.NoError(t, err)
	assert.Zero(t, v)
	v, err = cgroupfs.SingleValue([]byte("1073741824\n"))
	assert.NoError(t, err)
	assert.Equal(t, uint64(1<<30), v)
	_, err = cgroupfs.SingleValue([]byte(""))
	assert.EqualError(t, err, `bad number ""`)

	v, err = cgroupfs.KeyedValue([]byte("usage_usec 10\nuser_usec 7\n"), "user_usec")
	assert.NoError(t, err)
	assert.Equal(t, uint64(7), v)
	_, err = cgroupfs.KeyedValue([]byte("usage_usec 10\n"), "inactive_file")
	assert.EqualError(t, err, "no inactive_file")
	_, err = cgroupfs.KeyedValue([]byte("inactive_file -1\n"), "inactive_file")
	assert.EqualError(t, err, `inactive_file: bad number "-1"`)

	r, w, err := cgroupfs.ParseIOStat([]byte("8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n8:16 rbytes=10 wbytes=20\n"))
	assert.NoError(t, err)
	assert.Equal(t, [2]uint64{11, 22}, [2]uint64{r, w})
	r, w, err = cgroupfs.ParseIOStat(nil)
	assert.NoError(t, err, "a container that did no IO has an empty io.stat")
	assert.Zero(t, r+w)
	_, _, err = cgroupfs.ParseIOStat([]byte("8:0 rbytes=x\n"))
	assert.EqualError(t, err, `rbytes: bad number "x"`)

	r, w, n, err := cgroupfs.ParseBlkio([]byte("8:0 Read 1\n8:0 Write 2\n8:0 Sync 3\n8:0 Total 3\nTotal 3\n"))
	assert.NoError(t, err)
	assert.Equal(t, [3]uint64{1, 2, 4}, [3]uint64{r, w, uint64(n)})
	_, _, _, err = cgroupfs.ParseBlkio([]byte("8:0 Read\n"))
	assert.EqualError(t, err, `bad line "8:0 Read"`)

	pids, err := cgroupfs.ParsePIDs([]byte("1\n22\n\n"), nil)
	assert.NoError(t, err)
	assert.Equal(t, []int{1, 22}, pids)
	_, err = cgroupfs.ParsePIDs([]byte("1\nx\n"), nil)
	assert.EqualError(t, err, `cgroup.procs: bad pid "x"`)
}

// FuzzParsers feeds every control file parser arbitrary text: none may panic, and a value
// parsed without error is one the text spells.
func FuzzParsers(f *testing.F) {
	for _, seed := range []string{
		"max\n", "1073741824\n", "usage_usec 10\nuser_usec 7\n", "anon 1\ninactive_file 2\n",
		"8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n", "8:0 Read 1\n8:0 Write 2\nTotal 3\n", "1\n22\n",
	} {
		f.Add([]byte(seed))
	}
	captured, err := filepath.Glob(filepath.Join(captures, "v*", "*"))
	require.NoError(f, err)
	for _, file := range captured {
		b, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := cgroupfs.SingleValue(b); err == nil && v != 0 {
			assert.Contains(t, string(b), strconv.FormatUint(v, 10))
		}
		for _, key := range []string{"usage_usec", "inactive_file", "total_inactive_file"} {
			if v, err := cgroupfs.KeyedValue(b, key); err == nil {
				assert.Contains(t, string(b), key+" ")
				assert.Contains(t, string(b), strconv.FormatUint(v, 10))
			}
		}
		_, _, _ = cgroupfs.ParseIOStat(b)
		_, _, _, _ = cgroupfs.ParseBlkio(b)
		if pids, err := cgroupfs.ParsePIDs(b, nil); err == nil {
			for _, pid := range pids {
				assert.Positive(t, pid)
			}
		}
	})
}

// TestFindContainersFollowsTheTree: a walk that remembers the last one still sees containers
// come and go, and a repeated walk of an unchanged tree allocates next to nothing.
func TestFindContainersFollowsTheTree(t *testing.T) {
	mount := host(t, 2)
	h, err := cgroupfs.NewHierarchy(mount)
	require.NoError(t, err)
	paths := func() []string {
		found, err := h.FindContainers()
		require.NoError(t, err)
		var out []string
		for _, f := range found {
			out = append(out, f.Path)
		}
		return out
	}
	assert.Equal(t, []string{containerPath, sandboxPath}, paths())

	second := podPath + strings.Repeat("ab", 32)
	require.NoError(t, os.Mkdir(filepath.Join(mount, second), 0o755))
	assert.Equal(t, []string{containerPath, second, sandboxPath}, paths(), "sorted by path")
	require.NoError(t, os.Remove(filepath.Join(mount, containerPath, "cgroup.procs")))
	require.NoError(t, os.RemoveAll(filepath.Join(mount, containerPath)))
	assert.Equal(t, []string{second, sandboxPath}, paths())

	allocs := testing.AllocsPerRun(20, func() { _, _ = h.FindContainers() })
	assert.LessOrEqual(t, allocs, float64(2), "only the walk's stack of directories")
}
