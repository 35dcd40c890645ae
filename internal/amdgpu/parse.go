// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxLines bounds every line-oriented parser: no amdgpu file has more than a few dozen lines.
const maxLines = 256

// ParseUint reads a file holding one unsigned decimal number (gpu_busy_percent,
// mem_info_vram_total, hwmon's temp1_input, ...).
func ParseUint(s string) (uint64, error) {
	return strconv.ParseUint(strings.TrimSpace(s), 10, 64)
}

// ParseInt reads a file holding one signed decimal number (hwmon temperatures may be negative).
func ParseInt(s string) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
}

// ParseUniqueID reads unique_id: the GPU's serial as hexadecimal, with or without 0x (the
// driver prints %016llx).
func ParseUniqueID(s string) (uint64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "0x")
	if t == "" || len(t) > 16 {
		return 0, fmt.Errorf("unique_id %q: not up to 16 hexadecimal digits", s)
	}
	return strconv.ParseUint(t, 16, 64)
}

// ErrcountRAS is one block's RAS error counts (ras/<block>_err_count).
type ErrcountRAS struct {
	Uncorrected, Corrected uint64
}

// ErrRASQueryInaccessible is a RAS count file's answer while the GPU cannot be queried: during a
// reset, or before RAS is ready (amdgpu_ras.c, amdgpu_ras_sysfs_read). A state of the GPU, not
// a read error.
var ErrRASQueryInaccessible = errors.New("RAS counts inaccessible (GPU in reset)")

// rasQueryInaccessible is what amdgpu_ras_sysfs_read writes instead of the counts then.
const rasQueryInaccessible = "Query currently inaccessible"

// ParseRAS reads a ras/<block>_err_count file: "ue: <n>" and "ce: <n>" lines (newer kernels add
// "de: <n>", deferred errors, which are neither and are skipped). Both counts must be present.
// The driver's "Query currently inaccessible" is ErrRASQueryInaccessible.
func ParseRAS(s string) (ErrcountRAS, error) {
	if strings.TrimSpace(s) == rasQueryInaccessible {
		return ErrcountRAS{}, ErrRASQueryInaccessible
	}
	var c ErrcountRAS
	var haveUE, haveCE bool
	err := eachLine(s, func(line string) error {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("line %q: no \"key: count\"", line)
		}
		n, err := ParseUint(value)
		if err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		switch strings.TrimSpace(key) {
		case "ue":
			c.Uncorrected, haveUE = n, true
		case "ce":
			c.Corrected, haveCE = n, true
		}
		return nil
	})
	if err == nil && (!haveUE || !haveCE) {
		err = errors.New("ue or ce count missing")
	}
	return c, err
}

// DPM is a pp_dpm_* file: the clock levels in MHz and the current one.
type DPM struct {
	LevelsMHz []uint64
	// Current is the index of the level marked "*"; -1 when none is.
	Current int
}

// CurrentMHz is the current level's clock.
func (d DPM) CurrentMHz() (uint64, bool) {
	if d.Current < 0 {
		return 0, false
	}
	return d.LevelsMHz[d.Current], true
}

// MaxMHz is the highest level's clock.
func (d DPM) MaxMHz() (uint64, bool) {
	if len(d.LevelsMHz) == 0 {
		return 0, false
	}
	return max(d.LevelsMHz[0], d.LevelsMHz[len(d.LevelsMHz)-1]), true
}

// ParseDPM reads pp_dpm_sclk or pp_dpm_mclk: lines "<level>: <clock>Mhz" with " *" after the
// current one ("0: 500Mhz", "1: 1700Mhz *"); some ASICs print a deep-sleep level "S: 19Mhz".
func ParseDPM(s string) (DPM, error) {
	d := DPM{Current: -1}
	err := eachLine(s, func(line string) error {
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("line %q: no \"level: clock\"", line)
		}
		rest = strings.TrimSpace(rest)
		current := strings.HasSuffix(rest, "*")
		rest = strings.TrimSpace(strings.TrimSuffix(rest, "*"))
		lower := strings.ToLower(rest)
		if !strings.HasSuffix(lower, "mhz") {
			return fmt.Errorf("line %q: clock not in Mhz", line)
		}
		mhz, err := strconv.ParseUint(strings.TrimSpace(rest[:len(rest)-3]), 10, 64)
		if err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		if current {
			d.Current = len(d.LevelsMHz)
		}
		d.LevelsMHz = append(d.LevelsMHz, mhz)
		return nil
	})
	if err == nil && len(d.LevelsMHz) == 0 {
		err = errors.New("no clock level")
	}
	return d, err
}

// pcieGenerations are the transfer rates of each PCIe generation, in GT/s ×10.
var pcieGenerations = map[uint64]int{25: 1, 50: 2, 80: 3, 160: 4, 320: 5, 640: 6}

// ParseLinkSpeed reads the PCI core's current_link_speed or max_link_speed ("16.0 GT/s PCIe";
// kernels before 4.17 wrote "8 GT/s") and returns the PCIe generation. "Unknown" (a link that
// is down) is an error.
func ParseLinkSpeed(s string) (int, error) {
	t := strings.TrimSpace(s)
	num, _, ok := strings.Cut(t, " GT/s")
	if !ok {
		return 0, fmt.Errorf("link speed %q: not \"<rate> GT/s\"", t)
	}
	gts, err := strconv.ParseFloat(num, 64)
	if err != nil || gts <= 0 || gts > 1000 {
		return 0, fmt.Errorf("link speed %q: not a rate", t)
	}
	gen, ok := pcieGenerations[uint64(gts*10+0.5)]
	if !ok {
		return 0, fmt.Errorf("link speed %q: no PCIe generation has this rate", t)
	}
	return gen, nil
}

// ParseLinkWidth reads current_link_width or max_link_width: the lane count in decimal.
func ParseLinkWidth(s string) (int, error) {
	n, err := ParseUint(s)
	if err != nil || n == 0 || n > 32 {
		return 0, fmt.Errorf("link width %q: not 1 to 32 lanes", strings.TrimSpace(s))
	}
	return int(n), nil
}

// KFDProperties is what the receiver uses of a KFD topology node's properties file.
type KFDProperties struct {
	// LocationID is the GPU's pci_dev_id (bus<<8 | devfn) with a partition's index in its
	// partition bits (see join); Domain the PCI domain.
	LocationID, Domain uint32
	// DRMRenderMinor is N of /dev/dri/renderD<N>, the node's render device.
	DRMRenderMinor int
	// UniqueID is the GPU's unique_id; 0 when the node has none.
	UniqueID uint64
	// SIMDCount is 0 on a CPU node.
	SIMDCount uint64
	// DeviceID is the GPU's PCI device id (0x74a1: MI300X); 0 on a CPU node.
	DeviceID uint16
}

// ParsePCIAddress reads a PCI address in the kernel's form (0000:c1:00.0) into its domain and
// pci_dev_id (bus<<8 | device<<3 | function).
func ParsePCIAddress(s string) (domain, devID uint32, err error) {
	var dom, bus, dev, fn uint64
	d, rest, ok1 := strings.Cut(s, ":")
	b, rest, ok2 := strings.Cut(rest, ":")
	v, f, ok3 := strings.Cut(rest, ".")
	if ok1 && ok2 && ok3 && len(b) == 2 && len(v) == 2 && len(f) == 1 {
		if dom, err = strconv.ParseUint(d, 16, 32); err == nil {
			if bus, err = strconv.ParseUint(b, 16, 8); err == nil {
				if dev, err = strconv.ParseUint(v, 16, 5); err == nil {
					fn, err = strconv.ParseUint(f, 16, 3)
				}
			}
		}
		if err == nil {
			return uint32(dom), uint32(bus<<8 | dev<<3 | fn), nil
		}
	}
	return 0, 0, fmt.Errorf("PCI address %q: not <domain>:<bus>:<device>.<function>", s)
}

// ParseKFDProperties reads /sys/class/kfd/kfd/topology/nodes/<n>/properties: "<name> <value>"
// lines of decimal numbers. location_id and drm_render_minor must be there; domain is 0 where
// the kernel prints none (kernels before the KFD gave the PCI domain, which drove domain 0).
func ParseKFDProperties(s string) (KFDProperties, error) {
	var p KFDProperties
	seen := map[string]bool{}
	err := eachLine(s, func(line string) error {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("line %q: no \"name value\"", line)
		}
		var dst func(uint64) error
		switch name {
		case "location_id":
			dst = func(v uint64) error { p.LocationID = uint32(v); return fitsIn(v, 1<<32) }
		case "domain":
			dst = func(v uint64) error { p.Domain = uint32(v); return fitsIn(v, 1<<32) }
		case "drm_render_minor":
			dst = func(v uint64) error { p.DRMRenderMinor = int(v); return fitsIn(v, 1<<20) }
		case "unique_id":
			dst = func(v uint64) error { p.UniqueID = v; return nil }
		case "simd_count":
			dst = func(v uint64) error { p.SIMDCount = v; return nil }
		case "device_id":
			dst = func(v uint64) error { p.DeviceID = uint16(v); return fitsIn(v, 1<<16) }
		default:
			return nil
		}
		v, err := ParseUint(value)
		if err == nil {
			err = dst(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		seen[name] = true
		return nil
	})
	if err == nil {
		for _, name := range []string{"location_id", "drm_render_minor"} {
			if !seen[name] {
				return p, fmt.Errorf("%s missing", name)
			}
		}
	}
	return p, err
}

func fitsIn(v, limit uint64) error {
	if v >= limit {
		return fmt.Errorf("%d out of range", v)
	}
	return nil
}

// ParseUevent reads a device's uevent ("KEY=value" lines) into a map.
func ParseUevent(s string) (map[string]string, error) {
	m := map[string]string{}
	err := eachLine(s, func(line string) error {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("line %q: no KEY=value", line)
		}
		m[k] = v
		return nil
	})
	return m, err
}

// eachLine calls f with each non-empty line of s, trimmed, up to maxLines.
func eachLine(s string, f func(string) error) error {
	sc := bufio.NewScanner(strings.NewReader(s))
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		n++
		if n > maxLines {
			return fmt.Errorf("more than %d lines", maxLines)
		}
		if err := f(line); err != nil {
			return err
		}
	}
	return sc.Err()
}
