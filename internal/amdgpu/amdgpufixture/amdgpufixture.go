// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package amdgpufixture writes the files the amdgpu driver and the KFD write for a node's AMD
// GPUs (/sys/class/drm, the PCI devices' attributes, hwmon, gpu_metrics, RAS counts, the KFD
// topology and per-process VRAM, /dev/kfd), from a plain description of each GPU. Write can be
// called again on the same root with new values: it overwrites the files in place, so a reader
// running meanwhile sees old or new values, and removes the files of readings a GPU no longer
// has (Missing) and the files of a GPU that fell off the bus (Gone). The gpu receiver's tests and
// goldens use it; Player plays a scenario (internal/gpuscenario) over time for `make demo-amd`.
package amdgpufixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
)

// Node is a node's AMD GPUs and the processes using them.
type Node struct {
	GPUs []GPU
	// Processes hold VRAM on a GPU's KFD node (/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>).
	Processes []Process
	// CPUNodes is the number of CPU NUMA nodes the KFD topology lists before the GPUs.
	CPUNodes int
	// DriverVersion is /sys/module/amdgpu/version (AMD's out-of-tree driver); "" writes none.
	DriverVersion string
	// KernelRelease is /proc/sys/kernel/osrelease.
	KernelRelease string
}

// GPU is one physical GPU (an MI250X GCD is one: each is its own PCI device and KFD node).
type GPU struct {
	// PCIAddress in the kernel's form, 0000:c1:00.0.
	PCIAddress string
	// PCIDeviceID is the PCI device id in lowercase hex (74a1 is MI300X).
	PCIDeviceID string
	// ProductName is product_name, from the board's FRU; "" writes none.
	ProductName string
	UniqueID    uint64
	// GPUID is the KFD gpu_id; partition p has GPUID+p.
	GPUID uint32
	// Partitionable is a GPU the driver can partition (MI300 series: it has an XCP manager).
	// The driver then registers MAX_XCP-1 (7) amdgpu_xcp platform devices for it at probe,
	// each with a card and a render node, whatever the mode; a partition uses the first ones.
	Partitionable bool
	// Partitions is the number of compute partitions (0 or 1: not partitioned; MI300X CPX: 8,
	// MI308X CPX: 4); more than one needs Partitionable.
	Partitions int

	BusyPercent, MemBusyPercent int
	VRAMTotal, VRAMUsed         uint64
	// Link speeds as the PCI core writes them ("32.0 GT/s PCIe") and widths in lanes.
	LinkSpeed, MaxLinkSpeed string
	LinkWidth, MaxLinkWidth int
	// Clock levels in MHz, and the index of the current one.
	SclkLevelsMHz, MclkLevelsMHz []int
	SclkLevel, MclkLevel         int
	// Temperatures in millidegrees; EdgeMilliC nil: the GPU has no edge sensor (MI300).
	EdgeMilliC                *int
	JunctionMilliC, MemMilliC int
	// PowerMicroW is power1_average, or power1_input when PowerInput (MI300); 0 writes
	// neither (the second GCD of an MI250X reports no power).
	PowerMicroW uint64
	PowerInput  bool
	// Power caps in microwatts (0 writes none).
	PowerCapMicroW, PowerCapMinMicroW, PowerCapMaxMicroW uint64
	// RAS is each block's counts (ras/<block>_err_count); nil: no ras directory.
	RAS map[string]amdgpu.ErrcountRAS
	// Metrics is gpu_metrics; nil writes none.
	Metrics *GPUMetrics
	// Missing are files to leave out, relative to the device directory (gpu_metrics,
	// Node.HwmonDir(i)+"/temp2_input", ...); Corrupt are files to write with this content
	// instead.
	Missing []string
	Corrupt map[string]string
	// Gone: the GPU has fallen off the bus; Write removes its card, render node, PCI device,
	// partitions, KFD nodes and processes' VRAM files, and keeps the other GPUs' numbers.
	Gone bool
}

// GPUMetrics is a gpu_metrics blob: its revision and its fields by their kgd_pp_interface.h
// names; every other field is left unset (all bits 1), as the driver does.
type GPUMetrics struct {
	Revision amdgpu.Revision
	Values   map[string]uint64
	// Raw replaces the encoded blob (a revision the reader does not know, a short file).
	Raw []byte
}

// Process holds VRAM on partition Partition of GPU GPU (indexes into Node.GPUs).
type Process struct {
	PID, GPU, Partition int
	VRAMBytes           uint64
}

// HwmonDir is GPU gpu's hwmon directory relative to its device directory: hwmon/hwmon<N>, N
// the GPU's index (hwmon devices are numbered as the driver registers them, GPU by GPU).
func (Node) HwmonDir(gpu int) string { return hwmonDir(gpu) }

func hwmonDir(gpu int) string { return "hwmon/hwmon" + strconv.Itoa(gpu) }

// Card is GPU gpu's card directory relative to the root (sys/class/drm/card<N>): the cards are
// numbered GPU by GPU, each GPU's PCI card then its amdgpu_xcp devices' cards.
func (n Node) Card(gpu int) string {
	minor := 0
	for i := range gpu {
		minor += n.GPUs[i].drmDevices()
	}
	return "sys/class/drm/card" + strconv.Itoa(minor)
}

// firstRenderMinor is the render node of the first DRM device (/dev/dri/renderD128).
const firstRenderMinor = 128

// xcpDevices is the number of amdgpu_xcp platform devices the driver registers for a
// partitionable GPU: MAX_XCP-1 (amdgpu_xcp.c, amdgpu_xcp_dev_alloc, at torvalds/linux
// a3f9e4bc1ec9d8f1e352eb7c1cbaea3168246be7), numbered across GPUs in probe order.
const xcpDevices = 8 - 1

// drmDevices is the number of DRM devices (cards, render nodes) a GPU takes: its PCI card and
// its amdgpu_xcp devices.
func (g *GPU) drmDevices() int {
	if g.Partitionable {
		return 1 + xcpDevices
	}
	return 1
}

// Write lays out n under root. Card and render numbers follow the kernel's order: each GPU's
// PCI card, then its amdgpu_xcp platform devices, whose first Partitions-1 carry partitions
// 1 and up; the KFD has one node per partition.
func Write(root string, n Node) error {
	w := &writer{root: root}
	w.file("dev/kfd", "")
	if n.DriverVersion != "" {
		w.file("sys/module/amdgpu/version", n.DriverVersion+"\n")
	}
	if n.KernelRelease != "" {
		w.file("proc/sys/kernel/osrelease", n.KernelRelease+"\n")
	}
	node := 0
	for c := range n.CPUNodes {
		w.kfdNode(node, 0, fmt.Sprintf("cpu_cores_count 48\nsimd_count 0\nmem_banks_count 1\ncpu_core_id_base %d\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n", 48*c))
		node++
	}
	minor, xcp := 0, 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		parts := max(1, g.Partitions)
		if parts > 1 && !g.Partitionable {
			return fmt.Errorf("GPU %s: %d partitions on a GPU that cannot be partitioned", g.PCIAddress, parts)
		}
		if g.Gone {
			w.removeGPU(g, minor, node, xcp)
		} else {
			w.gpu(g, i, minor)
			for x := range g.drmDevices() - 1 {
				w.xcpDevice(xcp+x, minor+1+x)
			}
			for p := range parts {
				w.kfdGPU(node+p, g, p, firstRenderMinor+minor+p)
			}
		}
		node += parts
		minor += g.drmDevices()
		xcp += g.drmDevices() - 1
	}
	for _, p := range n.Processes {
		if p.GPU >= len(n.GPUs) {
			return fmt.Errorf("process %d: no GPU %d", p.PID, p.GPU)
		}
		g := n.GPUs[p.GPU]
		file := fmt.Sprintf("sys/class/kfd/kfd/proc/%d/vram_%d", p.PID, g.GPUID+uint32(p.Partition))
		if g.Gone {
			w.remove(file)
			continue
		}
		w.file(file, u64(p.VRAMBytes))
	}
	return w.err
}

type writer struct {
	root string
	err  error
}

// file writes rel whole through a rename, so that a reader never sees it half written (a
// rewrite by a demo races with the reader; sysfs hands out a whole value per read).
func (w *writer) file(rel, content string) {
	if w.err != nil {
		return
	}
	path := filepath.Join(w.root, rel)
	if w.err = os.MkdirAll(filepath.Dir(path), 0o755); w.err != nil {
		return
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if w.err = os.WriteFile(tmp, []byte(content), 0o644); w.err == nil { //nolint:gosec // G306: sysfs files are world-readable
		w.err = os.Rename(tmp, path)
	}
}

func (w *writer) remove(rel string) {
	if w.err == nil {
		if err := os.Remove(filepath.Join(w.root, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.err = err
		}
	}
}

func (w *writer) removeAll(rel string) {
	if w.err == nil {
		w.err = os.RemoveAll(filepath.Join(w.root, rel))
	}
}

// removeGPU takes away what the kernel removes when a GPU falls off the bus: its cards and
// render nodes, its PCI device, its amdgpu_xcp platform devices and its KFD nodes.
func (w *writer) removeGPU(g *GPU, minor, node, xcp int) {
	w.removeAll("sys/bus/pci/devices/" + g.PCIAddress)
	for m := range g.drmDevices() {
		w.removeAll(fmt.Sprintf("sys/class/drm/card%d", minor+m))
		w.removeAll(fmt.Sprintf("sys/class/drm/renderD%d", firstRenderMinor+minor+m))
		if m > 0 {
			w.removeAll("sys/devices/platform/amdgpu_xcp_" + strconv.Itoa(xcp+m-1))
		}
	}
	for p := range max(1, g.Partitions) {
		w.removeAll(fmt.Sprintf("sys/class/kfd/kfd/topology/nodes/%d", node+p))
	}
}

// symlink links rel to target, replacing what was there.
func (w *writer) symlink(target, rel string) {
	w.remove(rel)
	if w.err != nil {
		return
	}
	path := filepath.Join(w.root, rel)
	if w.err = os.MkdirAll(filepath.Dir(path), 0o755); w.err == nil {
		w.err = os.Symlink(target, path)
	}
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) + "\n" }

// gpu writes physical GPU number gpu: its PCI device directory, the card and render node
// linking to it.
func (w *writer) gpu(g *GPU, gpu, minor int) {
	dev := "sys/bus/pci/devices/" + g.PCIAddress
	card := fmt.Sprintf("sys/class/drm/card%d", minor)
	w.symlink("../../../bus/pci/devices/"+g.PCIAddress, card+"/device")
	w.symlink("../../../bus/pci/devices/"+g.PCIAddress, fmt.Sprintf("sys/class/drm/renderD%d/device", firstRenderMinor+minor))
	missing := map[string]bool{}
	for _, m := range g.Missing {
		missing[m] = true
	}
	put := func(rel, content string) {
		if c, ok := g.Corrupt[rel]; ok {
			content = c
		}
		if missing[rel] {
			w.remove(dev + "/" + rel)
			return
		}
		w.file(dev+"/"+rel, content)
	}
	put("uevent", fmt.Sprintf("DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID=1002:%s\nPCI_SUBSYS_ID=1002:0C34\nPCI_SLOT_NAME=%s\nMODALIAS=pci:v00001002d0000%sd\n",
		strings.ToUpper(g.PCIDeviceID), g.PCIAddress, strings.ToUpper(g.PCIDeviceID)))
	if g.ProductName != "" {
		put("product_name", g.ProductName+"\n")
	}
	put("unique_id", fmt.Sprintf("%016x\n", g.UniqueID))
	put("gpu_busy_percent", strconv.Itoa(g.BusyPercent)+"\n")
	put("mem_busy_percent", strconv.Itoa(g.MemBusyPercent)+"\n")
	put("mem_info_vram_total", u64(g.VRAMTotal))
	put("mem_info_vram_used", u64(g.VRAMUsed))
	put("current_link_speed", g.LinkSpeed+"\n")
	put("max_link_speed", g.MaxLinkSpeed+"\n")
	put("current_link_width", strconv.Itoa(g.LinkWidth)+"\n")
	put("max_link_width", strconv.Itoa(g.MaxLinkWidth)+"\n")
	put("pp_dpm_sclk", dpm(g.SclkLevelsMHz, g.SclkLevel))
	put("pp_dpm_mclk", dpm(g.MclkLevelsMHz, g.MclkLevel))
	for block, c := range g.RAS {
		put("ras/"+block+"_err_count", fmt.Sprintf("ue: %d\nce: %d\n", c.Uncorrected, c.Corrected))
	}
	hw := hwmonDir(gpu) + "/"
	put(hw+"name", "amdgpu\n")
	temps := []struct {
		label string
		milli *int
	}{{"edge", g.EdgeMilliC}, {"junction", &g.JunctionMilliC}, {"mem", &g.MemMilliC}}
	for i, t := range temps {
		n := strconv.Itoa(i + 1)
		if t.milli == nil {
			// The driver hides the sensor's files (amdgpu_hwmon_attributes_visible).
			w.remove(dev + "/" + hw + "temp" + n + "_label")
			w.remove(dev + "/" + hw + "temp" + n + "_input")
			continue
		}
		put(hw+"temp"+n+"_label", t.label+"\n")
		put(hw+"temp"+n+"_input", strconv.Itoa(*t.milli)+"\n")
	}
	power := hw + "power1_average"
	if g.PowerInput {
		power = hw + "power1_input"
	}
	if g.PowerMicroW > 0 {
		put(power, u64(g.PowerMicroW))
	}
	for file, v := range map[string]uint64{"power1_cap": g.PowerCapMicroW, "power1_cap_min": g.PowerCapMinMicroW, "power1_cap_max": g.PowerCapMaxMicroW} {
		if v > 0 {
			put(hw+file, u64(v))
		}
	}
	if len(g.SclkLevelsMHz) > 0 {
		put(hw+"freq1_label", "sclk\n")
		put(hw+"freq1_input", u64(uint64(g.SclkLevelsMHz[g.SclkLevel])*1e6))
	}
	if len(g.MclkLevelsMHz) > 0 {
		put(hw+"freq2_label", "mclk\n")
		put(hw+"freq2_input", u64(uint64(g.MclkLevelsMHz[g.MclkLevel])*1e6))
	}
	if m := g.Metrics; m != nil {
		blob := m.Raw
		if blob == nil {
			var err error
			if blob, err = amdgpu.EncodeGPUMetrics(m.Revision, m.Values); err != nil && w.err == nil {
				w.err = err
			}
		}
		put("gpu_metrics", string(blob))
	}
}

func dpm(levels []int, current int) string {
	var b strings.Builder
	for i, mhz := range levels {
		fmt.Fprintf(&b, "%d: %dMhz", i, mhz)
		if i == current {
			b.WriteString(" *")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// xcpDevice writes amdgpu_xcp platform device number xcp (the name from kernel 6.5 on) with
// its card and render node.
func (w *writer) xcpDevice(xcp, minor int) {
	name := "amdgpu_xcp_" + strconv.Itoa(xcp)
	dev := "sys/devices/platform/" + name
	w.file(dev+"/uevent", "MODALIAS=platform:"+name+"\n")
	w.symlink("../../../devices/platform/"+name, fmt.Sprintf("sys/class/drm/card%d/device", minor))
	w.symlink("../../../devices/platform/"+name, fmt.Sprintf("sys/class/drm/renderD%d/device", firstRenderMinor+minor))
}

func (w *writer) kfdNode(node int, gpuID uint32, properties string) {
	dir := fmt.Sprintf("sys/class/kfd/kfd/topology/nodes/%d/", node)
	w.file(dir+"gpu_id", strconv.FormatUint(uint64(gpuID), 10)+"\n")
	w.file(dir+"properties", properties)
}

// kfdGPU writes partition p's KFD node: the properties the KFD prints for an MI300X
// (kfd_topology.c, node_show), those the reader uses with real values and a few others as
// context. As kfd_topology_add_device does, a partitioned GPU's nodes carry the partition
// index ORed into location_id (2560 to 2563 for the four of 0000:0a:00.0) and the GPU's
// unique_id.
func (w *writer) kfdGPU(node int, g *GPU, p, renderMinor int) {
	domain, devID, err := amdgpu.ParsePCIAddress(g.PCIAddress)
	if err != nil && w.err == nil {
		w.err = err
	}
	location := devID
	if g.Partitions > 1 {
		location |= uint32(p)
	}
	deviceID, _ := strconv.ParseUint(g.PCIDeviceID, 16, 16)
	// An MI300X has 8 XCDs of 38 CUs (152 SIMDs), an MI308X 4 of 20 (80 SIMDs): the
	// simd_count and num_xcc of the captures in internal/amdgpu/testdata.
	xcds, simds := 8, 152
	if g.PCIDeviceID == "74a2" {
		xcds, simds = 4, 80
	}
	parts := max(1, g.Partitions)
	props := fmt.Sprintf("cpu_cores_count 0\nsimd_count %d\nmem_banks_count 1\nvendor_id 4098\ndevice_id %d\nlocation_id %d\ndomain %d\ndrm_render_minor %d\nunique_id %d\nnum_xcc %d\n",
		simds*xcds/parts, deviceID, location, domain, renderMinor, g.UniqueID, xcds/parts)
	w.kfdNode(node, g.GPUID+uint32(p), props)
}
