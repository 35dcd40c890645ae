// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package amdgpu reads AMD GPUs from the files the amdgpu driver and the KFD (the ROCm compute
// driver in the same module) write under /sys, without ROCm: which GPUs and compute partitions
// the node has, each GPU's sysfs attributes and gpu_metrics, and the VRAM each process holds.
// Every file is parsed by a bounded, fuzzed parser; a file that is missing, or that the driver
// refuses to read (an attribute the ASIC does not support), leaves its reading out; a file that
// cannot be parsed is a ReadError, and the other readings are kept. The gpu receiver maps the
// snapshots to metrics; the fixture generator (amdgpufixture) writes the same files.
package amdgpu // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Sources name the kind of file a ReadError came from (collector_read_errors_total's source).
const (
	SourceSysfs      = "sysfs"
	SourceDPM        = "pp_dpm"
	SourcePCIeLink   = "pcie_link"
	SourceRAS        = "ras"
	SourceHwmon      = "hwmon"
	SourceGPUMetrics = "gpu_metrics"
	SourceKFD        = "kfd"
)

// ReadError is a file that was there but could not be read or parsed.
type ReadError struct {
	Source string
	Path   string
	Err    error
}

func (e ReadError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }

func (e ReadError) Unwrap() error { return e.Err }

// maxFileBytes bounds every read: gpu_metrics is under 2 KiB, the text files under 4 KiB.
const maxFileBytes = 64 << 10

// Reader reads the files under Root, where the host's / is (/ or /hostfs).
type Reader struct {
	Root string
}

// Paths, relative to the root.
const (
	drmClass     = "sys/class/drm"
	kfdTopology  = "sys/class/kfd/kfd/topology/nodes"
	kfdProcesses = "sys/class/kfd/kfd/proc"
	kfdDevice    = "dev/kfd"
)

func (r Reader) path(rel ...string) string {
	return filepath.Join(append([]string{r.Root}, rel...)...)
}

// readFile reads a whole file, at most maxFileBytes. ok is false, without an error, when the
// file does not exist or the driver refuses the read because the ASIC lacks the attribute.
func readFile(path string) (b []byte, ok bool, err error) {
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		b, err = io.ReadAll(io.LimitReader(f, maxFileBytes))
	}
	switch {
	case err == nil:
		return b, true, nil
	case absent(err):
		return nil, false, nil
	default:
		return nil, false, err
	}
}

// absent is an error that means "no such reading": the file is not there, or the driver
// answers that the ASIC does not support it (amdgpu returns EOPNOTSUPP, ENODATA or EINVAL).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENODEV)
}

// Present reports whether the node has the KFD and at least one GPU the amdgpu driver drives:
// what the receiver's auto backend looks for.
func (r Reader) Present() bool {
	if _, err := os.Stat(r.path(kfdDevice)); err != nil {
		return false
	}
	gpus, _ := r.physicalGPUs()
	return len(gpus) > 0
}

// Device is what the device plugin hands out: a whole GPU, or one compute partition of a GPU
// in a partition mode (MI300 CPX, DPX, QPX, ...), each partition its own KFD node.
type Device struct {
	// PCIAddress is the physical GPU's, in the kernel's form (0000:c1:00.0).
	PCIAddress string
	// DeviceDir is the physical GPU's sysfs device directory (…/cardN/device).
	DeviceDir string
	// Physical is the GPU's index in PCI address order.
	Physical int
	// Partition is the partition's index on its GPU in the KFD's order (the node_id in
	// location_id; render-node order among nodes with the same one), 0 on a whole GPU;
	// Partitions how many the GPU has (1 when it is not partitioned).
	Partition, Partitions int
	// PartitionDevice is the kernel device ROCm's device plugin allocates a partition by: the
	// PCI address for the partition that is the PCI device, amdgpu_xcp_N for the others. Empty
	// on a whole GPU.
	PartitionDevice string
	// GPUID is the KFD's gpu_id (what /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> names); 0
	// when the KFD has no node for the device.
	GPUID uint32
	// KFDUniqueID is the KFD node's unique_id; 0 when it has none.
	KFDUniqueID uint64
}

var cardName = regexp.MustCompile(`^card\d+$`)

type physicalGPU struct {
	pci, dir string
	// domain and devID (bus<<8 | devfn, the kernel's pci_dev_id) are pci's numbers.
	domain, devID uint32
	// uniqueID is the card's unique_id; 0 when it has none or it cannot be read (ReadGPU
	// reports that).
	uniqueID uint64
}

// physicalGPUs lists the PCI devices the amdgpu driver drives that have a DRM card, in PCI
// address order; a card whose uevent cannot be read is an error and left out.
func (r Reader) physicalGPUs() ([]physicalGPU, []error) {
	entries, err := os.ReadDir(r.path(drmClass))
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, []error{ReadError{SourceSysfs, r.path(drmClass), err}}
	}
	var gpus []physicalGPU
	var errs []error
	seen := map[string]bool{}
	for _, e := range entries {
		if !cardName.MatchString(e.Name()) {
			continue
		}
		dir := r.path(drmClass, e.Name(), "device")
		if target, err := os.Readlink(dir); err == nil && isXCPDevice(filepath.Base(target)) {
			continue // a partition's card (7 per MI300 GPU in any mode): no uevent to read
		}
		path := filepath.Join(dir, "uevent")
		b, ok, err := readFile(path)
		if err == nil && ok {
			var ev map[string]string
			if ev, err = ParseUevent(string(b)); err == nil && ev["DRIVER"] == "amdgpu" && ev["PCI_SLOT_NAME"] != "" {
				g := physicalGPU{pci: strings.ToLower(ev["PCI_SLOT_NAME"]), dir: dir}
				if g.domain, g.devID, err = ParsePCIAddress(g.pci); err == nil && !seen[g.pci] {
					seen[g.pci] = true
					if b, ok, _ := readFile(filepath.Join(dir, "unique_id")); ok {
						g.uniqueID, _ = ParseUniqueID(string(b))
					}
					gpus = append(gpus, g)
				}
			}
		}
		if err != nil {
			errs = append(errs, ReadError{SourceSysfs, path, err})
		}
	}
	slices.SortFunc(gpus, func(a, b physicalGPU) int { return cmp.Compare(a.pci, b.pci) })
	return gpus, errs
}

type kfdNode struct {
	gpuID uint32
	props KFDProperties
	// path is the node's properties file.
	path string
}

// kfdNodes lists the KFD's GPU nodes (gpu_id not 0).
func (r Reader) kfdNodes() ([]kfdNode, []error) {
	entries, err := os.ReadDir(r.path(kfdTopology))
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, []error{ReadError{SourceKFD, r.path(kfdTopology), err}}
	}
	var nodes []kfdNode
	var errs []error
	for _, e := range entries {
		dir := r.path(kfdTopology, e.Name())
		b, ok, err := readFile(filepath.Join(dir, "gpu_id"))
		if !ok || err != nil {
			if err != nil {
				errs = append(errs, ReadError{SourceKFD, filepath.Join(dir, "gpu_id"), err})
			}
			continue
		}
		id, err := ParseUint(string(b))
		if err != nil || id > 0xFFFFFFFF {
			errs = append(errs, ReadError{SourceKFD, filepath.Join(dir, "gpu_id"), fmt.Errorf("gpu_id %q: not a 32-bit number", strings.TrimSpace(string(b)))})
			continue
		}
		if id == 0 {
			continue // a CPU node
		}
		path := filepath.Join(dir, "properties")
		b, ok, err = readFile(path)
		if err == nil && !ok {
			err = errors.New("missing")
		}
		var p KFDProperties
		if err == nil {
			p, err = ParseKFDProperties(string(b))
		}
		if err != nil {
			errs = append(errs, ReadError{SourceKFD, path, err})
			continue
		}
		nodes = append(nodes, kfdNode{gpuID: uint32(id), props: p, path: path})
	}
	return nodes, errs
}

// How the KFD numbers a GPU's nodes (drivers/gpu/drm/amd/amdkfd/kfd_topology.c,
// kfd_topology_add_device, at torvalds/linux d7ab8e67aa52e27837aefdc0d67af93ae0931abc and
// gregkh/linux 213edb4348e7a79022801f8a65b162d4a8a652a5): location_id is pci_dev_id(pdev),
// bus<<8 | devfn, and on a GPU with more than one partition (num_nodes > 1; GC 9.4.3 only in
// the kernels that first drove MI300) the partition's node_id is ORed into its low bits. A
// GPU has at most MAX_XCP (8) partitions, so node_id fits in devfn's function bits. A variant
// merged and reverted in 2023 put node_id in bits 31:28 instead.
const (
	partitionLowBits  = 8 - 1
	partitionHighBits = 28
)

// UnjoinedKFDNodeError is a KFD GPU node that belongs to no amdgpu card: its location_id,
// with or without the partition bits, names no GPU of its domain whose unique_id agrees.
type UnjoinedKFDNodeError struct {
	Domain, LocationID uint32
	UniqueID           uint64
}

func (e UnjoinedKFDNodeError) Error() string {
	return fmt.Sprintf("location_id %d (domain %d, unique_id %016x) belongs to no amdgpu card: the node is left out", e.LocationID, e.Domain, e.UniqueID)
}

// join finds the GPU a KFD node belongs to and the node's partition index on it (node_id).
// The GPU is the one of the node's domain at location_id as it is (a whole GPU, or a GPU's
// first partition), else with the partition bits cleared; a candidate whose unique_id differs
// from the node's is not it (the partition bits can name another PCI function).
func join(gpus []physicalGPU, p KFDProperties) (gpu int, nodeID uint32, ok bool) {
	devID := p.LocationID & 0xFFFF
	high := p.LocationID >> partitionHighBits
	for _, base := range []uint32{devID, devID &^ partitionLowBits} {
		for i, g := range gpus {
			if g.domain != p.Domain || g.devID != base {
				continue
			}
			if p.UniqueID != 0 && g.uniqueID != 0 && p.UniqueID != g.uniqueID {
				continue
			}
			return i, high | (devID - base), true
		}
	}
	return 0, 0, false
}

// Devices lists the node's devices: each physical GPU in PCI address order, a partitioned one
// (more than one KFD node joined to it) as its partitions in node_id order (render-node order
// where the kernel gives the partitions one location_id). A KFD node that joins no GPU is
// left out with an UnjoinedKFDNodeError.
func (r Reader) Devices() ([]Device, []error) {
	gpus, errs := r.physicalGPUs()
	nodes, kerrs := r.kfdNodes()
	errs = append(errs, kerrs...)
	type joined struct {
		kfdNode
		nodeID uint32
	}
	byGPU := make([][]joined, len(gpus))
	for _, n := range nodes {
		i, nodeID, ok := join(gpus, n.props)
		if !ok {
			errs = append(errs, ReadError{SourceKFD, n.path, UnjoinedKFDNodeError{n.props.Domain, n.props.LocationID, n.props.UniqueID}})
			continue
		}
		byGPU[i] = append(byGPU[i], joined{n, nodeID})
	}
	var devices []Device
	for i, g := range gpus {
		list := byGPU[i]
		slices.SortFunc(list, func(a, b joined) int {
			return cmp.Or(cmp.Compare(a.nodeID, b.nodeID), cmp.Compare(a.props.DRMRenderMinor, b.props.DRMRenderMinor))
		})
		if len(list) <= 1 {
			d := Device{PCIAddress: g.pci, DeviceDir: g.dir, Physical: i, Partitions: 1}
			if len(list) == 1 {
				d.GPUID, d.KFDUniqueID = list[0].gpuID, list[0].props.UniqueID
			}
			devices = append(devices, d)
			continue
		}
		for p, n := range list {
			d := Device{
				PCIAddress: g.pci, DeviceDir: g.dir, Physical: i, Partition: p, Partitions: len(list),
				GPUID: n.gpuID, KFDUniqueID: n.props.UniqueID, PartitionDevice: g.pci,
			}
			if p > 0 {
				var err error
				if d.PartitionDevice, err = r.partitionDevice(n.props.DRMRenderMinor); err != nil {
					errs = append(errs, err)
				}
			}
			devices = append(devices, d)
		}
	}
	return devices, errs
}

// partitionDevice names the platform device (amdgpu_xcp.N on kernels before 6.5's rename,
// amdgpu_xcp_N after) whose render node a partition's KFD node names, in the device plugin's
// form amdgpu_xcp_N. The link is read, not followed, so it works under any root.
func (r Reader) partitionDevice(renderMinor int) (string, error) {
	link := r.path(drmClass, "renderD"+strconv.Itoa(renderMinor), "device")
	target, err := os.Readlink(link)
	if err != nil {
		return "", ReadError{SourceKFD, link, err}
	}
	name := filepath.Base(target)
	if !isXCPDevice(name) {
		return "", ReadError{SourceKFD, link, fmt.Errorf("links to %s, not an amdgpu_xcp partition device", target)}
	}
	return strings.Replace(name, "amdgpu_xcp.", "amdgpu_xcp_", 1), nil
}

// isXCPDevice is whether a device name is an amdgpu_xcp platform device (amdgpu_xcp.N or
// amdgpu_xcp_N).
func isXCPDevice(name string) bool { return strings.HasPrefix(name, "amdgpu_xcp") }

// DriverVersion is the amdgpu module's version (/sys/module/amdgpu/version, set by AMD's
// out-of-tree driver), else the kernel release of the in-tree driver; "" when neither is read.
func (r Reader) DriverVersion() string {
	for _, rel := range []string{"sys/module/amdgpu/version", "proc/sys/kernel/osrelease"} {
		if b, ok, err := readFile(r.path(rel)); ok && err == nil {
			if v := strings.TrimSpace(string(b)); v != "" && len(v) < 128 {
				return v
			}
		}
	}
	return ""
}

// ProcessVRAM reads /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>: the VRAM bytes each process
// holds on each GPU, by gpu_id and pid. A process that exits while read is left out.
func (r Reader) ProcessVRAM() (map[uint32]map[int]uint64, []error) {
	entries, err := os.ReadDir(r.path(kfdProcesses))
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, []error{ReadError{SourceKFD, r.path(kfdProcesses), err}}
	}
	out := map[uint32]map[int]uint64{}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		files, err := os.ReadDir(r.path(kfdProcesses, e.Name()))
		if err != nil {
			continue // exited
		}
		for _, f := range files {
			idText, ok := strings.CutPrefix(f.Name(), "vram_")
			if !ok {
				continue
			}
			path := r.path(kfdProcesses, e.Name(), f.Name())
			id, err := strconv.ParseUint(idText, 10, 32)
			if err != nil {
				errs = append(errs, ReadError{SourceKFD, path, fmt.Errorf("gpu_id %q: %w", idText, err)})
				continue
			}
			b, ok, err := readFile(path)
			if !ok {
				if err != nil {
					errs = append(errs, ReadError{SourceKFD, path, err})
				}
				continue
			}
			n, err := ParseUint(string(b))
			if err != nil {
				errs = append(errs, ReadError{SourceKFD, path, err})
				continue
			}
			gpu := uint32(id)
			if out[gpu] == nil {
				out[gpu] = map[int]uint64{}
			}
			out[gpu][pid] = n
		}
	}
	return out, errs
}
