// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Snapshot is one reading of a physical GPU's sysfs files. A nil field is a reading the GPU
// does not give (its file is missing or the driver refuses it) or that could not be parsed
// (then Errors says why).
type Snapshot struct {
	// BusyPercent and MemBusyPercent: gpu_busy_percent, mem_busy_percent.
	BusyPercent, MemBusyPercent *float64
	// VRAMTotal and VRAMUsed: mem_info_vram_total, mem_info_vram_used (bytes).
	VRAMTotal, VRAMUsed *uint64
	// UniqueID: unique_id.
	UniqueID *uint64
	// ProductName: product_name (from the board's FRU EEPROM; "" where the board has none).
	ProductName string
	// PCIDeviceID is the PCI device id from uevent's PCI_ID ("1002:74A1" → 0x74a1).
	PCIDeviceID string
	// Link generation and width, current and max: current_link_speed, max_link_speed,
	// current_link_width, max_link_width.
	LinkGen, LinkGenMax, LinkWidth, LinkWidthMax *int
	// Sclk and Mclk: pp_dpm_sclk and pp_dpm_mclk.
	Sclk, Mclk *DPM
	// RAS has each block's error counts (ras/<block>_err_count), by block; nil without RAS.
	// A block whose counts the driver cannot query now (a GPU in reset) is left out and
	// listed in RASInaccessible.
	RAS             map[string]ErrcountRAS
	RASInaccessible []string
	Hwmon           Hwmon
	// Metrics is gpu_metrics, nil when missing, unreadable or of an unknown revision.
	Metrics *GPUMetrics
	Errors  []error
}

// Hwmon is the readings of the GPU's hwmon directory (device/hwmon/hwmon*), converted from the
// hwmon ABI's millidegrees, microwatts and hertz.
type Hwmon struct {
	// Temperatures by temp*_label: edge, junction (hotspot), mem (HBM).
	EdgeCelsius, JunctionCelsius, MemCelsius *float64
	// PowerWatts is power1_average, or power1_input where the ASIC has no average (MI300).
	PowerWatts *float64
	// PowerCapWatts, PowerCapMinWatts, PowerCapMaxWatts: power1_cap, power1_cap_min,
	// power1_cap_max.
	PowerCapWatts, PowerCapMinWatts, PowerCapMaxWatts *float64
	// SclkMHz and MclkMHz by freq*_label sclk, mclk.
	SclkMHz, MclkMHz *float64
}

// ReadGPU reads the sysfs attributes of a physical GPU's device directory.
func ReadGPU(dir string) Snapshot {
	g := gpuRead{dir: dir}
	s := &g.snap
	s.BusyPercent = g.float(SourceSysfs, "gpu_busy_percent", 1)
	s.MemBusyPercent = g.float(SourceSysfs, "mem_busy_percent", 1)
	s.VRAMTotal = g.uint(SourceSysfs, "mem_info_vram_total")
	s.VRAMUsed = g.uint(SourceSysfs, "mem_info_vram_used")
	if text, ok := g.text(SourceSysfs, "unique_id"); ok && strings.TrimSpace(text) != "" {
		// The driver writes nothing when the GPU has no serial (consumer GPUs, APUs).
		if id, err := ParseUniqueID(text); err != nil {
			g.fail(SourceSysfs, "unique_id", err)
		} else {
			s.UniqueID = &id
		}
	}
	if text, ok := g.text(SourceSysfs, "product_name"); ok {
		s.ProductName = strings.TrimSpace(text)
	}
	if ev := parsed(&g, SourceSysfs, "uevent", ParseUevent); ev != nil {
		if _, id, ok := strings.Cut((*ev)["PCI_ID"], ":"); ok {
			s.PCIDeviceID = strings.ToLower(id)
		}
	}
	s.LinkGen = g.linkSpeed("current_link_speed")
	s.LinkGenMax = g.linkSpeed("max_link_speed")
	s.LinkWidth = parsed(&g, SourcePCIeLink, "current_link_width", ParseLinkWidth)
	s.LinkWidthMax = parsed(&g, SourcePCIeLink, "max_link_width", ParseLinkWidth)
	s.Sclk = parsed(&g, SourceDPM, "pp_dpm_sclk", ParseDPM)
	s.Mclk = parsed(&g, SourceDPM, "pp_dpm_mclk", ParseDPM)
	g.ras()
	g.hwmon()
	if b, ok := g.bytes(SourceGPUMetrics, "gpu_metrics"); ok {
		m, err := ParseGPUMetrics(b)
		if err != nil {
			g.fail(SourceGPUMetrics, "gpu_metrics", err)
		} else {
			s.Metrics = &m
		}
	}
	return g.snap
}

type gpuRead struct {
	dir  string
	snap Snapshot
}

func (g *gpuRead) fail(source, rel string, err error) {
	g.snap.Errors = append(g.snap.Errors, ReadError{Source: source, Path: filepath.Join(g.dir, rel), Err: err})
}

func (g *gpuRead) bytes(source, rel string) ([]byte, bool) {
	b, ok, err := readFile(filepath.Join(g.dir, rel))
	if err != nil {
		g.fail(source, rel, err)
	}
	return b, ok
}

func (g *gpuRead) text(source, rel string) (string, bool) {
	b, ok := g.bytes(source, rel)
	return string(b), ok
}

// parsed reads and parses one file: nil when it is absent or malformed (an error then).
func parsed[T any](g *gpuRead, source, rel string, parse func(string) (T, error)) *T {
	text, ok := g.text(source, rel)
	if !ok {
		return nil
	}
	v, err := parse(text)
	if err != nil {
		g.fail(source, rel, err)
		return nil
	}
	return &v
}

func (g *gpuRead) uint(source, rel string) *uint64 { return parsed(g, source, rel, ParseUint) }

// linkSpeedUnknown is what the PCI core writes for a link whose speed it cannot tell (a link
// in training or down): no reading, and no error.
const linkSpeedUnknown = "Unknown"

func (g *gpuRead) linkSpeed(rel string) *int {
	text, ok := g.text(SourcePCIeLink, rel)
	if !ok || strings.TrimSpace(text) == linkSpeedUnknown {
		return nil
	}
	gen, err := ParseLinkSpeed(text)
	if err != nil {
		g.fail(SourcePCIeLink, rel, err)
		return nil
	}
	return &gen
}

// float reads an integer file scaled by scale.
func (g *gpuRead) float(source, rel string, scale float64) *float64 {
	n := parsed(g, source, rel, ParseInt)
	if n == nil {
		return nil
	}
	f := float64(*n) * scale
	return &f
}

// maxRASBlocks bounds the ras directory's listing.
const maxRASBlocks = 64

func (g *gpuRead) ras() {
	entries, err := os.ReadDir(filepath.Join(g.dir, "ras"))
	if err != nil {
		if !absent(err) {
			g.fail(SourceRAS, "ras", err)
		}
		return
	}
	for _, e := range entries {
		block, ok := strings.CutSuffix(e.Name(), "_err_count")
		if !ok || block == "" {
			continue
		}
		if len(g.snap.RAS) == maxRASBlocks {
			break
		}
		rel := filepath.Join("ras", e.Name())
		text, ok := g.text(SourceRAS, rel)
		if !ok {
			continue
		}
		c, err := ParseRAS(text)
		switch {
		case errors.Is(err, ErrRASQueryInaccessible):
			g.snap.RASInaccessible = append(g.snap.RASInaccessible, block)
		case err != nil:
			g.fail(SourceRAS, rel, err)
		default:
			if g.snap.RAS == nil {
				g.snap.RAS = map[string]ErrcountRAS{}
			}
			g.snap.RAS[block] = c
		}
	}
}

func (g *gpuRead) hwmon() {
	dirs, _ := filepath.Glob(filepath.Join(g.dir, "hwmon", "hwmon*"))
	if len(dirs) == 0 {
		return
	}
	slices.Sort(dirs)
	rel := func(name string) string { return filepath.Join("hwmon", filepath.Base(dirs[0]), name) }
	h := &g.snap.Hwmon
	for i := 1; i <= 8; i++ {
		n := string(rune('0' + i))
		label, ok := g.text(SourceHwmon, rel("temp"+n+"_label"))
		if !ok {
			continue
		}
		var dst **float64
		switch strings.TrimSpace(label) {
		case "edge":
			dst = &h.EdgeCelsius
		case "junction":
			dst = &h.JunctionCelsius
		case "mem":
			dst = &h.MemCelsius
		default:
			continue
		}
		*dst = g.float(SourceHwmon, rel("temp"+n+"_input"), 0.001)
	}
	if h.PowerWatts = g.float(SourceHwmon, rel("power1_average"), 1e-6); h.PowerWatts == nil {
		h.PowerWatts = g.float(SourceHwmon, rel("power1_input"), 1e-6)
	}
	h.PowerCapWatts = g.float(SourceHwmon, rel("power1_cap"), 1e-6)
	h.PowerCapMinWatts = g.float(SourceHwmon, rel("power1_cap_min"), 1e-6)
	h.PowerCapMaxWatts = g.float(SourceHwmon, rel("power1_cap_max"), 1e-6)
	for i := 1; i <= 2; i++ {
		n := string(rune('0' + i))
		label, ok := g.text(SourceHwmon, rel("freq"+n+"_label"))
		if !ok {
			continue
		}
		var dst **float64
		switch strings.TrimSpace(label) {
		case "sclk":
			dst = &h.SclkMHz
		case "mclk":
			dst = &h.MclkMHz
		default:
			continue
		}
		*dst = g.float(SourceHwmon, rel("freq"+n+"_input"), 1e-6)
	}
}

// models are the product names of Instinct GPUs by PCI device id (the kernel's amdgpu_drv.c
// PCI table and pci.ids), for boards whose product_name is empty.
var models = map[string]string{
	"738c": "AMD Instinct MI100",
	"7408": "AMD Instinct MI250X",
	"740c": "AMD Instinct MI250X / MI250",
	"740f": "AMD Instinct MI210",
	"74a0": "AMD Instinct MI300A",
	"74a1": "AMD Instinct MI300X",
	"74a2": "AMD Instinct MI308X",
	"74a5": "AMD Instinct MI325X",
	"74a9": "AMD Instinct MI300X HF",
}

// Model is the GPU's product name: product_name, else the name of its PCI device id, else
// "AMD GPU 1002:<device id>".
func (s Snapshot) Model() string {
	if s.ProductName != "" {
		return s.ProductName
	}
	if m, ok := models[s.PCIDeviceID]; ok {
		return m
	}
	return "AMD GPU 1002:" + s.PCIDeviceID
}
