// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse: no scenario file panics the loader, and one that loads has GPUs, identities and
// signals that can be played. Seeded with every shipped scenario (their captures resolve from
// testdata, where the replays are).
func FuzzParse(f *testing.F) {
	for _, path := range shippedScenarios(f) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, "testdata")
		if err != nil {
			return
		}
		if sc.GPUs < 1 {
			t.Fatalf("a loaded scenario has %d GPUs", sc.GPUs)
		}
		for i := range min(sc.GPUs, 16) {
			_ = sc.UUID(i)
			_ = sc.MIGUUIDs(i)
			_ = sc.PCIAddress(i).String()
			sig := sc.SignalsOf(i)
			for _, s := range []*Signal{sig.Utilization, sig.Memory, sig.Temperature, sig.Power} {
				_ = NewTrack(s, 0, 1).At(time.Hour)
			}
		}
	})
}

// FuzzParseNvidiaSMI: no dump panics the parser, and what it accepts has identities. Seeded
// with the real captures.
func FuzzParseNvidiaSMI(f *testing.F) {
	captures, err := filepath.Glob(filepath.Join("testdata", "nvidia-smi", "*.xml"))
	if err != nil || len(captures) == 0 {
		f.Fatal("no captures", err)
	}
	for _, path := range captures {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(smiDump(smiIdentity))
	f.Fuzz(func(t *testing.T, data []byte) {
		gpus, err := ParseNvidiaSMI(data)
		if err != nil {
			return
		}
		for _, g := range gpus {
			if g.UUID == "" || g.Model == "" || g.MemoryMiB == 0 || g.PowerMinW > g.PowerMaxW {
				t.Fatalf("accepted an incomplete GPU: %+v", g)
			}
		}
	})
}
