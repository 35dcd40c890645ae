// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
)

// containerStats is what the task metrics need from a container's cgroup, whatever its version.
// Each controller is read on its own: one that cannot be read (ok false) costs only its metrics.
type containerStats struct {
	cpuOK, memoryOK, ioOK bool
	cpuSeconds            float64
	memUsage              uint64
	memLimit              uint64
	inactiveFile          uint64
	blockRead             uint64
	blockWrite            uint64
}

// anyOK is whether any controller could be read.
func (cs containerStats) anyOK() bool { return cs.cpuOK || cs.memoryOK || cs.ioOK }

// cgroupHierarchy hides the cgroup version: v1 spreads a container over controller directories,
// v2 keeps it in one. Paths are relative to the hierarchy root, as cgroupfs.Found gives them.
type cgroupHierarchy interface {
	findContainers() ([]cgroupfs.Found, error)
	processes(path string) ([]int, error)
	// stat reads every controller it can; the error names those it could not (their ok false).
	stat(path string) (containerStats, error)
}

func newCgroupHierarchy(mount, procRoot string) (cgroupHierarchy, error) {
	version, err := cgroupfs.DetectVersion(mount)
	if err != nil {
		return nil, err
	}
	if version == cgroupfs.V2 {
		return &cgroupV2{mount: mount}, nil
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

// cgroupV2 reads a container's few cgroup v2 files itself, into one buffer reused for every file
// of every container: containerd's cgroup2 package parses every key of every stat file through a
// bufio.Scanner of its own, most of a collection's allocations on a node of 500 containers.
// Files are read one after the other (the scraper is not concurrent), so one buffer serves.
type cgroupV2 struct {
	mount string
	buf   []byte
}

func (h *cgroupV2) findContainers() ([]cgroupfs.Found, error) {
	return cgroupfs.FindContainers(h.mount)
}

// read returns the contents of file in the container's directory, valid until the next read.
func (h *cgroupV2) read(path, file string) ([]byte, error) {
	f, err := os.Open(filepath.Join(h.mount, path, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h.buf = h.buf[:0]
	for {
		if len(h.buf) == cap(h.buf) {
			h.buf = append(h.buf, 0)[:len(h.buf)]
		}
		n, err := f.Read(h.buf[len(h.buf):cap(h.buf)])
		h.buf = h.buf[:len(h.buf)+n]
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return h.buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (h *cgroupV2) processes(path string) ([]int, error) {
	b, err := h.read(path, "cgroup.procs")
	if err != nil {
		return nil, err
	}
	var pids []int
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if len(line) == 0 {
			continue
		}
		pid, err := strconv.Atoi(string(line))
		if err != nil {
			return nil, fmt.Errorf("cgroup.procs: %w", err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func (h *cgroupV2) stat(path string) (containerStats, error) {
	var cs containerStats
	var errs []error
	usec, err := h.keyed(path, "cpu.stat", "usage_usec")
	if cs.cpuOK = err == nil; err != nil {
		errs = append(errs, fmt.Errorf("cpu: %w", err))
	}
	cs.cpuSeconds = float64(usec) / 1e6
	if err := h.memory(path, &cs); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	} else {
		cs.memoryOK = true
	}
	cs.blockRead, cs.blockWrite, err = h.io(path)
	if cs.ioOK = err == nil; err != nil {
		errs = append(errs, fmt.Errorf("io: %w", err))
	}
	return cs, errors.Join(errs...)
}

func (h *cgroupV2) memory(path string, cs *containerStats) (err error) {
	if cs.memUsage, err = h.single(path, "memory.current"); err != nil {
		return err
	}
	if cs.memLimit, err = h.single(path, "memory.max"); err != nil {
		return err
	}
	cs.inactiveFile, err = h.keyed(path, "memory.stat", "inactive_file")
	return err
}

// single reads a file of one number; "max" (no limit) is 0.
func (h *cgroupV2) single(path, file string) (uint64, error) {
	b, err := h.read(path, file)
	if err != nil {
		return 0, err
	}
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return 0, nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}

// keyed reads key's value from a flat keyed file ("key value" lines); a missing key is 0.
func (h *cgroupV2) keyed(path, file, key string) (uint64, error) {
	b, err := h.read(path, file)
	if err != nil {
		return 0, err
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %s: %w", file, key, err)
			}
			return n, nil
		}
	}
	return 0, nil
}

// io sums rbytes and wbytes over the devices of io.stat ("maj:min rbytes=N wbytes=N ..." lines).
func (h *cgroupV2) io(path string) (read, written uint64, err error) {
	b, err := h.read(path, "io.stat")
	if err != nil {
		return 0, 0, err
	}
	for _, field := range bytes.Fields(b) {
		k, v, ok := bytes.Cut(field, []byte{'='})
		if !ok || (string(k) != "rbytes" && string(k) != "wbytes") {
			continue
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("io.stat %s: %w", k, err)
		}
		if string(k) == "rbytes" {
			read += n
		} else {
			written += n
		}
	}
	return read, written, nil
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
	var cs containerStats
	var errs []error
	for _, c := range h.controllers {
		err := c.Stat(path, st)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name(), err))
		}
		switch c.Name() {
		case cgroup1.Cpuacct:
			cs.cpuOK = err == nil
		case cgroup1.Memory:
			cs.memoryOK = err == nil
		case cgroup1.Blkio:
			cs.ioOK = err == nil
		}
	}
	cs.cpuSeconds = float64(st.GetCPU().GetUsage().GetTotal()) / 1e9
	cs.memUsage = st.GetMemory().GetUsage().GetUsage()
	cs.memLimit = st.GetMemory().GetUsage().GetLimit()
	cs.inactiveFile = st.GetMemory().GetTotalInactiveFile()
	for _, e := range st.GetBlkio().GetIoServiceBytesRecursive() {
		switch {
		case strings.EqualFold(e.GetOp(), "read"):
			cs.blockRead += e.GetValue()
		case strings.EqualFold(e.GetOp(), "write"):
			cs.blockWrite += e.GetValue()
		}
	}
	return cs, errors.Join(errs...)
}

func toInts[T any](in []T, pid func(T) int) []int {
	out := make([]int, len(in))
	for i, v := range in {
		out[i] = pid(v)
	}
	return out
}
