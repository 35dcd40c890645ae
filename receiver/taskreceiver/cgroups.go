// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
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
	return cgroupV1{
		mount: mount,
		controllers: []v1Controller{
			cgroup1.NewCpuacct(mount),
			// Swap and kernel memory accounting are often disabled; usage and limit are all we read.
			cgroup1.NewMemory(mount, cgroup1.IgnoreModules("memsw", "kmem", "kmem.tcp")),
			cgroup1.NewBlkio(mount, cgroup1.ProcRoot(procRoot)),
		},
	}, nil
}

// v1Controller is the stat method of containerd's v1 controllers. They are called one after the
// other rather than through cgroup1.Cgroup.Stat, which runs each in a goroutine of its own where
// a parser panic (blkio does panic on a cut /proc/partitions) could not be recovered.
type v1Controller interface {
	cgroup1.Subsystem
	Stat(path string, stats *v1stats.Metrics) error
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
	mount       string
	controllers []v1Controller
}

func (h cgroupV1) findContainers() ([]cgroupfs.Found, error) {
	return cgroupfs.FindContainers(filepath.Join(h.mount, string(cgroup1.Memory)))
}

func (h cgroupV1) processes(path string) ([]int, error) {
	subsystems := make([]cgroup1.Subsystem, len(h.controllers))
	for i, c := range h.controllers {
		subsystems[i] = c
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(path), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subsystems, nil }))
	if err != nil {
		return nil, err
	}
	procs, err := cg.Processes(cgroup1.Memory, false)
	return toInts(procs, func(p cgroup1.Process) int { return p.Pid }), err
}

func (h cgroupV1) stat(path string) (containerStats, error) {
	st := &v1stats.Metrics{CPU: &v1stats.CPUStat{Usage: &v1stats.CPUUsage{}, Throttling: &v1stats.Throttle{}}}
	for _, c := range h.controllers {
		if err := c.Stat(path, st); err != nil {
			return containerStats{}, fmt.Errorf("%s: %w", c.Name(), err)
		}
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
