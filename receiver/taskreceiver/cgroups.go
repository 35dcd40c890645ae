// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
)

// containerStats is what the task metrics need from a container's cgroup, whatever its version.
type containerStats struct {
	cpuSeconds   float64
	memUsage     uint64
	memLimit     uint64
	inactiveFile uint64
	blockRead    uint64
	blockWrite   uint64
}

// cgroupHierarchy hides the cgroup version: v1 spreads a container over controller directories,
// v2 keeps it in one. Paths are relative to the hierarchy root, as cgroupfs.Found gives them.
type cgroupHierarchy interface {
	findContainers() ([]cgroupfs.Found, error)
	processes(path string) ([]int, error)
	stat(path string) (containerStats, error)
}

func newCgroupHierarchy(mount, procRoot string) (cgroupHierarchy, error) {
	version, err := cgroupfs.DetectVersion(mount)
	if err != nil {
		return nil, err
	}
	if version == cgroupfs.V2 {
		return cgroupV2{mount: mount}, nil
	}
	// Each controller is at mount/<name>; cpuacct, usually co-mounted as "cpu,cpuacct", has a
	// "cpuacct" symlink to it on every distribution.
	subsystems := []cgroup1.Subsystem{
		cgroup1.NewCpuacct(mount),
		// Swap and kernel memory accounting are often disabled; usage and limit are all we read.
		cgroup1.NewMemory(mount, cgroup1.IgnoreModules("memsw", "kmem", "kmem.tcp")),
		cgroup1.NewBlkio(mount, cgroup1.ProcRoot(procRoot)),
	}
	return cgroupV1{
		memoryRoot: filepath.Join(mount, "memory"),
		hierarchy:  func() ([]cgroup1.Subsystem, error) { return subsystems, nil },
	}, nil
}

type cgroupV2 struct{ mount string }

func (h cgroupV2) findContainers() ([]cgroupfs.Found, error) { return cgroupfs.FindContainers(h.mount) }

func (h cgroupV2) processes(path string) ([]int, error) {
	m, err := cgroup2.Load(path, cgroup2.WithMountpoint(h.mount))
	if err != nil {
		return nil, err
	}
	pids, err := m.Procs(false)
	return toInts(pids, func(p uint64) int { return int(p) }), err
}

func (h cgroupV2) stat(path string) (containerStats, error) {
	m, err := cgroup2.Load(path, cgroup2.WithMountpoint(h.mount))
	if err != nil {
		return containerStats{}, err
	}
	st, err := m.StatFiltered(cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatIO)
	if err != nil {
		return containerStats{}, err
	}
	cs := containerStats{
		cpuSeconds:   float64(st.GetCPU().GetUsageUsec()) / 1e6,
		memUsage:     st.GetMemory().GetUsage(),
		memLimit:     st.GetMemory().GetUsageLimit(),
		inactiveFile: st.GetMemory().GetInactiveFile(),
	}
	for _, e := range st.GetIo().GetUsage() {
		cs.blockRead += e.GetRbytes()
		cs.blockWrite += e.GetWbytes()
	}
	return cs, nil
}

type cgroupV1 struct {
	memoryRoot string
	hierarchy  cgroup1.Hierarchy
}

func (h cgroupV1) findContainers() ([]cgroupfs.Found, error) {
	return cgroupfs.FindContainers(h.memoryRoot)
}

func (h cgroupV1) load(path string) (cgroup1.Cgroup, error) {
	return cgroup1.Load(cgroup1.StaticPath(path), cgroup1.WithHierarchy(h.hierarchy))
}

func (h cgroupV1) processes(path string) ([]int, error) {
	cg, err := h.load(path)
	if err != nil {
		return nil, err
	}
	procs, err := cg.Processes(cgroup1.Memory, false)
	return toInts(procs, func(p cgroup1.Process) int { return p.Pid }), err
}

func (h cgroupV1) stat(path string) (containerStats, error) {
	cg, err := h.load(path)
	if err != nil {
		return containerStats{}, err
	}
	st, err := cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return containerStats{}, err
	}
	if st.GetMemory() == nil {
		return containerStats{}, errors.New("memory.stat is missing")
	}
	cs := containerStats{
		cpuSeconds:   float64(st.GetCPU().GetUsage().GetTotal()) / 1e9,
		memUsage:     st.GetMemory().GetUsage().GetUsage(),
		memLimit:     st.GetMemory().GetUsage().GetLimit(),
		inactiveFile: st.GetMemory().GetTotalInactiveFile(),
	}
	for _, e := range st.GetBlkio().GetIoServiceBytesRecursive() {
		switch {
		case strings.EqualFold(e.GetOp(), "read"):
			cs.blockRead += e.GetValue()
		case strings.EqualFold(e.GetOp(), "write"):
			cs.blockWrite += e.GetValue()
		}
	}
	return cs, nil
}

func toInts[T any](in []T, pid func(T) int) []int {
	out := make([]int, len(in))
	for i, v := range in {
		out[i] = pid(v)
	}
	return out
}
