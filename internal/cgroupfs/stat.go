// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs // import "github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// Stats is what a container's cgroup says of its use, whatever the cgroup version. Each
// controller is read on its own: one that cannot be read (its OK false) costs only its fields.
type Stats struct {
	CPUOK      bool
	CPUSeconds float64

	MemoryOK bool
	// MemoryUsage includes page cache; InactiveFile is the part of it that can be dropped at once.
	MemoryUsage, InactiveFile uint64
	// MemoryLimit is 0 when the container has none ("max" in v2).
	MemoryLimit uint64

	IOOK bool
	// ReadBytes and WriteBytes are summed over the block devices.
	ReadBytes, WriteBytes uint64
}

// Hierarchy reads the containers of the cgroup tree mounted at one place (normally
// /sys/fs/cgroup), v1 or v2. It reads the few files it needs itself, into one buffer reused for
// every file: containerd's cgroups library, made to manage cgroups, parses every key of every
// stat file of every controller through a bufio.Scanner of its own (and a v1 container's blkio
// through /proc/partitions), which was most of a collection's allocations on a node of 500
// containers. Not safe for concurrent use.
type Hierarchy struct {
	mount   string
	version Version
	files   hostfile.Reader
	tree    walker
	// noSchedulerBlkio is set once a v1 container's blkio directory is seen without
	// blkio.io_service_bytes_recursive: the kernel has no CFQ, and no container will have it.
	noSchedulerBlkio bool
	// nested holds the cgroups below a container's still to read in Processes, and listing the
	// one whose subdirectories are being listed.
	nested  []string
	listing string
}

// v1 controller directories under the mount. cpuacct, usually co-mounted as "cpu,cpuacct", has a
// "cpuacct" symlink to it on every distribution.
const (
	v1Memory  = "memory"
	v1Cpuacct = "cpuacct"
	v1Blkio   = "blkio"
)

// NewHierarchy detects the version of the hierarchy mounted at mount.
func NewHierarchy(mount string) (*Hierarchy, error) {
	version, err := DetectVersion(mount)
	if err != nil {
		return nil, err
	}
	return &Hierarchy{mount: mount, version: version}, nil
}

// Version is the hierarchy's cgroup version.
func (h *Hierarchy) Version() Version { return h.version }

// FindContainers returns every container cgroup (on v1, of the memory controller's tree, which
// every container has), in a slice valid until the next call.
func (h *Hierarchy) FindContainers() ([]Found, error) {
	dir := h.mount
	if h.version == V1 {
		dir = filepath.Join(h.mount, v1Memory)
	}
	return h.tree.findContainers(dir)
}

// Processes appends the process ids of the cgroup at path (a Found.Path), and of the cgroups
// below it, to pids[:0]. A container's processes may sit in cgroups of their own below the
// container's (systemd or a nested runtime in the container; kube-proxy makes one): they are
// still its, and on v2 the container's own cgroup.procs is then empty.
func (h *Hierarchy) Processes(path string, pids []int) ([]int, error) {
	pids = pids[:0]
	h.nested = append(h.nested[:0], path)
	for len(h.nested) > 0 {
		cgroup := h.nested[len(h.nested)-1]
		h.nested = h.nested[:len(h.nested)-1]
		b, err := h.read(v1Memory, cgroup, "cgroup.procs")
		if err == nil {
			pids, err = ParsePIDs(b, pids)
		}
		if err == nil {
			h.listing = cgroup
			err = h.subdirs(v1Memory, cgroup, h.addNested)
		}
		// A nested cgroup removed since it was listed had no process left.
		if err != nil && (cgroup == path || !errors.Is(err, fs.ErrNotExist)) {
			if cgroup == path {
				pids = pids[:0]
			}
			return pids, err
		}
	}
	return pids, nil
}

func (h *Hierarchy) addNested(name []byte) error {
	h.nested = append(h.nested, h.listing+"/"+string(name))
	return nil
}

// Stat reads every controller it can; the error names those it could not (their OK false).
func (h *Hierarchy) Stat(path string) (Stats, error) {
	var st Stats
	var cpuErr, memErr, ioErr error
	if h.version == V1 {
		cpuErr = h.cpuV1(path, &st)
		memErr = h.memory(path, &st, "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file")
		ioErr = h.ioV1(path, &st)
	} else {
		cpuErr = h.cpuV2(path, &st)
		memErr = h.memory(path, &st, "memory.current", "memory.max", "inactive_file")
		ioErr = h.ioV2(path, &st)
	}
	st.CPUOK, st.MemoryOK, st.IOOK = cpuErr == nil, memErr == nil, ioErr == nil
	if st.CPUOK && st.MemoryOK && st.IOOK {
		return st, nil // errors.Join would allocate its arguments even when all are nil
	}
	return st, errors.Join(named("cpu", cpuErr), named("memory", memErr), named("io", ioErr))
}

func named(controller string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", controller, err)
}

// read returns a control file of the cgroup at path; v1Controller is the controller directory
// it is in on v1 (v2 has one directory). The contents are valid until the next read.
func (h *Hierarchy) read(v1Controller, path, file string) ([]byte, error) {
	if h.version == V1 {
		return h.files.ReadFile(h.mount, v1Controller, path, file)
	}
	return h.files.ReadFile(h.mount, path, file)
}

// subdirs lists the subdirectories of the cgroup at path, as read does its files.
func (h *Hierarchy) subdirs(v1Controller, path string, fn func(name []byte) error) error {
	if h.version == V1 {
		return h.files.Subdirs(fn, h.mount, v1Controller, path)
	}
	return h.files.Subdirs(fn, h.mount, path)
}

func (h *Hierarchy) cpuV2(path string, st *Stats) error {
	b, err := h.read("", path, "cpu.stat")
	if err != nil {
		return err
	}
	usec, err := KeyedValue(b, "usage_usec")
	if err != nil {
		return fmt.Errorf("cpu.stat: %w", err)
	}
	st.CPUSeconds = float64(usec) / 1e6
	return nil
}

func (h *Hierarchy) cpuV1(path string, st *Stats) error {
	nsec, err := h.single(v1Cpuacct, path, "cpuacct.usage")
	st.CPUSeconds = float64(nsec) / 1e9
	return err
}

// memory reads usage and limit (single-value files) and inactive page cache (a key of memory.stat;
// on v1 its hierarchical total).
func (h *Hierarchy) memory(path string, st *Stats, usageFile, limitFile, inactiveKey string) (err error) {
	if st.MemoryUsage, err = h.single(v1Memory, path, usageFile); err != nil {
		return err
	}
	if st.MemoryLimit, err = h.single(v1Memory, path, limitFile); err != nil {
		return err
	}
	b, err := h.read(v1Memory, path, "memory.stat")
	if err != nil {
		return err
	}
	if st.InactiveFile, err = KeyedValue(b, inactiveKey); err != nil {
		return fmt.Errorf("memory.stat: %w", err)
	}
	return nil
}

// single reads a file of one number.
func (h *Hierarchy) single(v1Controller, path, file string) (uint64, error) {
	b, err := h.read(v1Controller, path, file)
	if err != nil {
		return 0, err
	}
	v, err := SingleValue(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return v, nil
}

func (h *Hierarchy) ioV2(path string, st *Stats) error {
	b, err := h.read("", path, "io.stat")
	if err != nil {
		return err
	}
	if st.ReadBytes, st.WriteBytes, err = ParseIOStat(b); err != nil {
		return fmt.Errorf("io.stat: %w", err)
	}
	return nil
}

// ioV1 reads the bytes the CFQ/BFQ scheduler accounted (blkio.io_service_bytes_recursive), or,
// where the cgroup's devices use another scheduler (the file is absent or lists no device), those
// the throttling layer saw (blkio.throttle.io_service_bytes): containerd's choice.
func (h *Hierarchy) ioV1(path string, st *Stats) error {
	var schedulerFileMissing bool
	if !h.noSchedulerBlkio {
		b, err := h.read(v1Blkio, path, "blkio.io_service_bytes_recursive")
		switch {
		case err == nil:
			var entries int
			if st.ReadBytes, st.WriteBytes, entries, err = ParseBlkio(b); err != nil {
				return fmt.Errorf("blkio.io_service_bytes_recursive: %w", err)
			}
			if entries > 0 {
				return nil
			}
		case errors.Is(err, fs.ErrNotExist):
			schedulerFileMissing = true
		default:
			return err
		}
	}
	b, err := h.read(v1Blkio, path, "blkio.throttle.io_service_bytes")
	if err != nil {
		return err
	}
	// The directory is there (a container that vanished would have neither file).
	h.noSchedulerBlkio = h.noSchedulerBlkio || schedulerFileMissing
	if st.ReadBytes, st.WriteBytes, _, err = ParseBlkio(b); err != nil {
		return fmt.Errorf("blkio.throttle.io_service_bytes: %w", err)
	}
	return nil
}

// The parsers below take a control file's contents; they allocate nothing but their errors.

// ParsePIDs appends the ids of cgroup.procs (one a line) to pids.
func ParsePIDs(b []byte, pids []int) ([]int, error) {
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		pid, err := strconv.Atoi(string(line))
		if err != nil || pid <= 0 {
			return pids, fmt.Errorf("cgroup.procs: bad pid %q", line)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// SingleValue parses a file of one number; "max" (v2's no limit) is 0.
func SingleValue(b []byte) (uint64, error) {
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return 0, nil
	}
	return parseUint(b)
}

// KeyedValue returns key's value in a flat keyed file ("key value" lines, as cpu.stat and
// memory.stat); a file without the key is malformed.
func KeyedValue(b []byte, key string) (uint64, error) {
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		if ok && string(k) == key {
			n, err := parseUint(v)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s", key)
}

// ParseIOStat sums rbytes and wbytes over the devices of v2's io.stat, a nested keyed file
// ("maj:min rbytes=N wbytes=N rios=N …" lines).
func ParseIOStat(b []byte) (read, written uint64, err error) {
	for line := range bytes.Lines(b) {
		first := true
		for field := range bytes.FieldsSeq(line) {
			if first { // the device
				first = false
				continue
			}
			k, v, ok := bytes.Cut(field, []byte{'='})
			if !ok {
				return 0, 0, fmt.Errorf("bad field %q", field)
			}
			var sum *uint64
			switch string(k) {
			case "rbytes":
				sum = &read
			case "wbytes":
				sum = &written
			default:
				continue
			}
			n, err := parseUint(v)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", k, err)
			}
			*sum += n
		}
	}
	return read, written, nil
}

// ParseBlkio sums the Read and Write lines of a v1 blkio file ("maj:min Op value" lines and a
// last "Total value" line) and counts its device lines.
func ParseBlkio(b []byte) (read, written uint64, entries int, err error) {
	for line := range bytes.Lines(b) {
		device, rest, _ := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		op, value, ok := bytes.Cut(rest, []byte{' '})
		switch {
		case len(device) == 0:
			continue
		case string(device) == "Total" && len(rest) > 0 && !ok:
			continue
		case !ok || bytes.IndexByte(device, ':') < 0:
			return 0, 0, 0, fmt.Errorf("bad line %q", bytes.TrimSpace(line))
		}
		n, err := parseUint(value)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s %s: %w", device, op, err)
		}
		entries++
		switch string(op) {
		case "Read":
			read += n
		case "Write":
			written += n
		}
	}
	return read, written, entries, nil
}

func parseUint(b []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", b)
	}
	return n, nil
}
