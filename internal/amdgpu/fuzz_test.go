// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets hold every parser of the driver's files to: no panic, whatever the input,
// and results that respect their types' promises.

func FuzzParseGPUMetrics(f *testing.F) {
	for _, rev := range KnownRevisions() {
		b, _ := EncodeGPUMetrics(rev, map[string]uint64{"average_gfx_activity": 50})
		f.Add(b)
	}
	for _, capture := range []string{"rx7800xt", "rx6900xt", "phoenix"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "sysfs", capture, "gpu_metrics")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{4, 0, 1, 9})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseGPUMetrics(b)
		if err == nil && StructureSize(m.Revision) > len(b) {
			t.Fatalf("%s parsed from %d bytes", m.Revision, len(b))
		}
	})
}

func FuzzParseRAS(f *testing.F) {
	f.Add("ue: 0\nce: 0\n")
	f.Add("ue: 1\nce: 23\nde: 4\n")
	f.Add("ue:\n")
	f.Add("Query currently inaccessible\n")
	f.Fuzz(func(_ *testing.T, s string) { _, _ = ParseRAS(s) })
}

func FuzzParseDPM(f *testing.F) {
	f.Add("0: 500Mhz\n1: 1420Mhz *\n2: 2100Mhz\n")
	f.Add("S: 19Mhz *\n0: 500Mhz\n")
	f.Add("0: Mhz *\n")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDPM(s)
		if err != nil {
			return
		}
		if d.Current >= len(d.LevelsMHz) || len(d.LevelsMHz) == 0 {
			t.Fatalf("current level %d of %d", d.Current, len(d.LevelsMHz))
		}
		d.CurrentMHz()
		d.MaxMHz()
	})
}

func FuzzParseLinkSpeed(f *testing.F) {
	f.Add("32.0 GT/s PCIe")
	f.Add("8 GT/s")
	f.Add("Unknown")
	f.Add("1e308 GT/s")
	f.Fuzz(func(t *testing.T, s string) {
		if gen, err := ParseLinkSpeed(s); err == nil && (gen < 1 || gen > 6) {
			t.Fatalf("generation %d", gen)
		}
		if w, err := ParseLinkWidth(s); err == nil && (w < 1 || w > 32) {
			t.Fatalf("width %d", w)
		}
	})
}

func FuzzParseKFDProperties(f *testing.F) {
	f.Add("simd_count 912\nlocation_id 512\ndomain 0\ndrm_render_minor 128\nunique_id 7843934696581995200\n")
	f.Add("location_id 268438016\ndomain 1\ndrm_render_minor 129\n")
	if b, err := os.ReadFile(filepath.Join("testdata", "kfd", "mi308x-cpx", "nodes", "33", "properties")); err == nil {
		f.Add(string(b)) // a real partition's node (testdata/kfd/SOURCE.md)
	}
	f.Add("location_id 99999999999999999999\n")
	f.Add("domain  \n")
	f.Add("0000:0a:00.0")
	f.Add("10000:ff:1f.7")
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := ParseKFDProperties(s); err == nil {
			// Whatever the node says, joining it never panics and names a GPU that exists.
			gpus := []physicalGPU{{domain: p.Domain, devID: p.LocationID &^ partitionLowBits & 0xFFFF}}
			if i, _, ok := join(gpus, p); ok && i != 0 {
				t.Fatalf("joined to GPU %d of 1", i)
			}
		}
		if domain, devID, err := ParsePCIAddress(s); err == nil {
			again := fmt.Sprintf("%04x:%02x:%02x.%x", domain, devID>>8, devID>>3&0x1f, devID&7)
			d2, id2, err := ParsePCIAddress(again)
			if err != nil || d2 != domain || id2 != devID || devID > 0xFFFF {
				t.Fatalf("%q read as %q: %v", s, again, err)
			}
		}
		_, _ = ParseUevent(s)
		_, _ = ParseUniqueID(s)
	})
}

// FuzzHwmon writes the fuzzed text into each hwmon file the reader reads and reads the GPU.
func FuzzHwmon(f *testing.F) {
	f.Add("edge\n", "36000\n")
	f.Add("junction", "-273150")
	f.Add("sclk\n", "99999999999999999999")
	dev := f.TempDir()
	dir := filepath.Join(dev, "hwmon", "hwmon0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, label, value string) {
		for _, name := range []string{"temp1", "temp2", "freq1"} {
			if err := os.WriteFile(filepath.Join(dir, name+"_label"), []byte(label), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name+"_input"), []byte(value), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "power1_average"), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
		ReadGPU(dev)
	})
}
