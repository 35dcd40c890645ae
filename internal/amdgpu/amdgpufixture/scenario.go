// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// Player plays an AMD scenario (internal/gpuscenario, profile mi300x) for `make demo-amd`:
// each GPU's load, the processes' VRAM, and faults, as distro/scenarios/mi300x-demo.yaml
// describes them. Node gives the node's files at a time since the start; Start rewrites them as
// time passes, so the amdgpu backend reads a node that changes.
type Player struct {
	sc      *gpuscenario.Scenario
	profile profile
}

// Limiters of a throttle fault: gpu_metrics v1_6+'s residency counters (smu_v13_0_6_ppt.c).
var limiters = map[string]string{
	"prochot":        "prochot_residency_acc",
	"ppt":            "ppt_residency_acc",
	"socket_thermal": "socket_thm_residency_acc",
	"vr_thermal":     "vr_thm_residency_acc",
	"hbm_thermal":    "hbm_thm_residency_acc",
}

// profile is a node a scenario can describe.
type profile struct {
	gpu  func(i, busy int) GPU
	node Node // without GPUs and processes
}

var profiles = map[string]profile{
	"mi300x": {gpu: MI300XGPU, node: Node{CPUNodes: 2, DriverVersion: "6.10.5", KernelRelease: "6.8.0-49-generic"}},
}

// NewPlayer plays sc, an AMD scenario.
func NewPlayer(sc *gpuscenario.Scenario) (*Player, error) {
	p, ok := profiles[sc.Profile]
	if !ok {
		return nil, fmt.Errorf("profile %s: not an AMD node this package writes (mi300x)", sc.Profile)
	}
	return &Player{sc: sc, profile: p}, nil
}

// loadOf is GPU i's load: its utilization signal's points (the validator allows constant and
// step signals only on an AMD node).
func (pl *Player) loadOf(i int) []gpuscenario.StepPoint {
	u := pl.sc.SignalsOf(i).Utilization
	switch {
	case u == nil:
		return nil
	case u.Constant != nil:
		return []gpuscenario.StepPoint{{Value: *u.Constant}}
	}
	return u.Step
}

// linkSpeeds are the PCI core's current_link_speed of each PCIe generation, and gpu_metrics'
// pcie_link_speed (0.1 GT/s).
var linkSpeeds = []struct {
	sysfs  string
	metric uint64
}{{"2.5 GT/s PCIe", 25}, {"5.0 GT/s PCIe", 50}, {"8.0 GT/s PCIe", 80}, {"16.0 GT/s PCIe", 160}, {"32.0 GT/s PCIe", 320}}

// busy is the busy percent of points at t.
func busy(points []gpuscenario.StepPoint, t time.Duration) int {
	if len(points) == 0 {
		return 0
	}
	b := points[0].Value
	for _, p := range points {
		if t >= p.At {
			b = p.Value
		}
	}
	return int(math.Round(b))
}

// overlap is how long [from, from+d) (d 0: forever) and [0, t) share.
func overlap(from, d, t time.Duration) time.Duration {
	end := t
	if d > 0 {
		end = min(end, from+d)
	}
	return max(0, end-from)
}

// Node is the node's files at t since the start.
func (pl *Player) Node(t time.Duration) Node {
	s, p := pl.sc, pl.profile
	n := p.node
	for i := range s.GPUs {
		points := pl.loadOf(i)
		g := p.gpu(i, busy(points, t))
		if i < len(s.Captured) {
			captured(&g, s.Captured[i])
		}
		m := g.Metrics.Values
		// The energy counter grows by each load's power over its time (1/65536 J units), the
		// accumulation counter by 1 per ms, as the SMU's do.
		m["energy_accumulator"] += uint64(joules(p, i, points, t) * 65536)
		m["accumulation_counter"] += uint64(t.Milliseconds())
		var used uint64
		for _, h := range s.Processes {
			if h.GPU == i {
				used += h.MemoryMiB << 20
			}
		}
		g.VRAMUsed = max(g.VRAMUsed, used+(2<<30))
		for k := range s.Faults {
			if f := &s.Faults[k]; f.GPU == i && t >= f.At {
				applyFault(&g, f, t)
			}
		}
		n.GPUs = append(n.GPUs, g)
	}
	for _, h := range s.Processes {
		n.Processes = append(n.Processes, Process{PID: int(h.PID), GPU: h.GPU, VRAMBytes: h.MemoryMiB << 20})
	}
	return n
}

// joules is the energy GPU i used from the start to t, its power following its load.
func joules(p profile, i int, points []gpuscenario.StepPoint, t time.Duration) float64 {
	edges := []time.Duration{0}
	for _, lp := range points {
		if lp.At > 0 && lp.At < t {
			edges = append(edges, lp.At)
		}
	}
	slices.Sort(edges)
	edges = append(edges, t)
	var j float64
	for k := 0; k+1 < len(edges); k++ {
		watts := float64(p.gpu(i, busy(points, edges[k])).PowerMicroW) / 1e6
		j += watts * (edges[k+1] - edges[k]).Seconds()
	}
	return j
}

// applyFault applies a fault that has happened by t.
func applyFault(g *GPU, f *gpuscenario.Fault, t time.Duration) {
	m := g.Metrics.Values
	switch f.Kind {
	case gpuscenario.FaultRAS:
		c := g.RAS[f.Block]
		c.Corrected += f.Corrected
		c.Uncorrected += f.Uncorrected
		g.RAS[f.Block] = c
	case gpuscenario.FaultPCIeDowngrade:
		if f.Active(t) {
			if f.Width > 0 {
				g.LinkWidth = f.Width
				m["pcie_link_width"] = uint64(f.Width)
			}
			if f.Generation > 0 {
				g.LinkSpeed = linkSpeeds[f.Generation-1].sysfs
				m["pcie_link_speed"] = linkSpeeds[f.Generation-1].metric
			}
		}
	case gpuscenario.FaultThrottle:
		// The counter counts the ms the limiter was engaged, like accumulation_counter.
		m[limiters[f.Limiter]] += uint64(overlap(f.At, f.Duration, t).Milliseconds())
		if f.Active(t) {
			g.SclkLevel = 0
			m["current_gfxclk"] = uint64(g.SclkLevelsMHz[0])
		}
	case gpuscenario.FaultGPULost:
		g.Gone = true
	}
}

// Start writes the node at the start under root, then again every tick in the background,
// until stop, which returns the first write that failed.
func (pl *Player) Start(root string, tick time.Duration) (stop func() error, err error) {
	if err := Write(root, pl.Node(0)); err != nil {
		return nil, err
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-ticker.C:
				if err := Write(root, pl.Node(now.Sub(start))); err != nil && writeErr == nil {
					writeErr = err
				}
			}
		}
	})
	var once sync.Once
	return func() error {
		once.Do(func() { close(done); wg.Wait() })
		return writeErr
	}, nil
}

// capturedModels are the product names of the Instinct GPUs a KFD capture names by PCI device
// id (the KFD has no product name); the MI300 series is partitionable.
var capturedModels = map[uint32]string{0x74a1: "AMD Instinct MI300X OAM", 0x74a2: "AMD Instinct MI308X OAM"}

// captured gives g the identity a capture recorded: its PCI address and device id, unique_id
// and partitions; the profile's readings stay.
func captured(g *GPU, c gpuscenario.CapturedGPU) {
	g.PCIAddress, g.UniqueID, g.Partitions = c.PCI.String(), c.UniqueID, c.Partitions
	g.PCIDeviceID = fmt.Sprintf("%04x", c.PCIDeviceID)
	g.ProductName = capturedModels[c.PCIDeviceID]
	g.Partitionable = g.ProductName != ""
}
