// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is an AMD node over time, for `make demo-amd`: each GPU's load, the processes'
// VRAM, and faults, as distro/scenarios/mi300x-demo.yaml describes them. Node gives the node's
// files at a time since the start; Start rewrites them as time passes, so the amdgpu backend
// reads a node that changes.
type Scenario struct {
	// Profile is the node: mi300x (MI300X, 8 GPUs, the values of MI300XGPU).
	Profile string `yaml:"profile"`
	// Load is every GPU's busy percent over time, unless a device entry sets its own.
	Load      []LoadPoint  `yaml:"load"`
	Devices   []DeviceLoad `yaml:"devices"`
	Processes []VRAMHolder `yaml:"processes"`
	Faults    []Fault      `yaml:"faults"`
}

// LoadPoint sets a GPU's busy percent from At on; before the first point the first holds.
type LoadPoint struct {
	At   time.Duration `yaml:"at"`
	Busy int           `yaml:"busy"`
}

// DeviceLoad is one GPU's own load.
type DeviceLoad struct {
	Index int         `yaml:"index"`
	Load  []LoadPoint `yaml:"load"`
}

// VRAMHolder is a process holding VRAM on a GPU (its KFD proc/<pid>/vram_<gpu_id> file).
type VRAMHolder struct {
	PID     int    `yaml:"pid"`
	GPU     int    `yaml:"gpu"`
	VRAMMiB uint64 `yaml:"vram_mib"`
}

// Fault kinds.
const (
	// FaultRAS adds RAS errors to a block's counts (ras/<block>_err_count).
	FaultRAS = "ras"
	// FaultPCIeDowngrade trains the GPU's link at Width lanes and/or Generation.
	FaultPCIeDowngrade = "pcie_downgrade"
	// FaultThrottle makes a limiter's residency counter of gpu_metrics grow for Duration (0:
	// until the end), with the clock at its lowest level.
	FaultThrottle = "throttle"
	// FaultGPULost takes the GPU off the bus: its files are gone.
	FaultGPULost = "gpu_lost"
)

// Limiters of a throttle fault: gpu_metrics v1_6+'s residency counters (smu_v13_0_6_ppt.c).
var limiters = map[string]string{
	"prochot":        "prochot_residency_acc",
	"ppt":            "ppt_residency_acc",
	"socket_thermal": "socket_thm_residency_acc",
	"vr_thermal":     "vr_thm_residency_acc",
	"hbm_thermal":    "hbm_thm_residency_acc",
}

// Fault happens on GPU GPU at At.
type Fault struct {
	At       time.Duration `yaml:"at"`
	Duration time.Duration `yaml:"duration"`
	GPU      int           `yaml:"gpu"`
	Kind     string        `yaml:"kind"`
	// Block, Corrected and Uncorrected are a ras fault's.
	Block       string `yaml:"block"`
	Corrected   uint64 `yaml:"corrected"`
	Uncorrected uint64 `yaml:"uncorrected"`
	// Width and Generation are a pcie_downgrade fault's link.
	Width      int `yaml:"width"`
	Generation int `yaml:"generation"`
	// Limiter is a throttle fault's: prochot, ppt, socket_thermal, vr_thermal or hbm_thermal.
	Limiter string `yaml:"limiter"`
}

// profile is a node a scenario can describe.
type profile struct {
	gpus int
	gpu  func(i, busy int) GPU
	node Node // without GPUs and processes
}

var profiles = map[string]profile{
	"mi300x": {gpus: 8, gpu: MI300XGPU, node: Node{CPUNodes: 2, DriverVersion: "6.10.5", KernelRelease: "6.8.0-49-generic"}},
}

// IsScenarioFile tells whether the scenario file at path is an AMD scenario (its profile is one
// of this package's), as opposed to the gpu receiver's simulated NVIDIA scenarios, which share
// distro/scenarios with it.
func IsScenarioFile(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var head struct {
		Profile string `yaml:"profile"`
	}
	if yaml.Unmarshal(data, &head) != nil {
		return false, nil // not an AMD scenario's YAML; the simulated backend's loader says why
	}
	_, ok := profiles[head.Profile]
	return ok, nil
}

// LoadScenario reads and checks a scenario file, strictly (unknown keys are errors).
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.SliceStable(s.Faults, func(i, j int) bool { return s.Faults[i].At < s.Faults[j].At })
	return &s, nil
}

func (s *Scenario) validate() error {
	p, ok := profiles[s.Profile]
	if !ok {
		return fmt.Errorf("profile must be mi300x, got %q", s.Profile)
	}
	var errs []error
	gpu := func(key string, i int) {
		if i < 0 || i >= p.gpus {
			errs = append(errs, fmt.Errorf("%s: gpu index %d is outside 0..%d", key, i, p.gpus-1))
		}
	}
	load := func(key string, points []LoadPoint) {
		for i, lp := range points {
			if lp.Busy < 0 || lp.Busy > 100 || lp.At < 0 {
				errs = append(errs, fmt.Errorf("%s[%d]: busy is a percent and at not negative, got %d at %s", key, i, lp.Busy, lp.At))
			}
		}
	}
	load("load", s.Load)
	for i, d := range s.Devices {
		gpu(fmt.Sprintf("devices[%d]", i), d.Index)
		load(fmt.Sprintf("devices[%d].load", i), d.Load)
	}
	for i, h := range s.Processes {
		gpu(fmt.Sprintf("processes[%d]", i), h.GPU)
		if h.PID <= 0 {
			errs = append(errs, fmt.Errorf("processes[%d]: pid must be set", i))
		}
	}
	for i, f := range s.Faults {
		key := fmt.Sprintf("faults[%d]", i)
		gpu(key, f.GPU)
		if f.At < 0 || f.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: at and duration must not be negative", key))
		}
		switch f.Kind {
		case FaultRAS:
			if f.Block == "" || f.Corrected == 0 && f.Uncorrected == 0 {
				errs = append(errs, fmt.Errorf("%s: kind ras needs a block and corrected or uncorrected errors", key))
			}
		case FaultPCIeDowngrade:
			if f.Width <= 0 && (f.Generation <= 0 || f.Generation > len(linkSpeeds)) {
				errs = append(errs, fmt.Errorf("%s: kind pcie_downgrade needs a width or a generation from 1 to %d", key, len(linkSpeeds)))
			}
		case FaultThrottle:
			if _, ok := limiters[f.Limiter]; !ok {
				errs = append(errs, fmt.Errorf("%s: kind throttle needs a limiter: prochot, ppt, socket_thermal, vr_thermal or hbm_thermal, got %q", key, f.Limiter))
			}
		case FaultGPULost:
		default:
			errs = append(errs, fmt.Errorf("%s: kind must be one of ras, pcie_downgrade, throttle, gpu_lost, got %q", key, f.Kind))
		}
	}
	return errors.Join(errs...)
}

// linkSpeeds are the PCI core's current_link_speed of each PCIe generation, and gpu_metrics'
// pcie_link_speed (0.1 GT/s).
var linkSpeeds = []struct {
	sysfs  string
	metric uint64
}{{"2.5 GT/s PCIe", 25}, {"5.0 GT/s PCIe", 50}, {"8.0 GT/s PCIe", 80}, {"16.0 GT/s PCIe", 160}, {"32.0 GT/s PCIe", 320}}

// loadOf is GPU i's load points.
func (s *Scenario) loadOf(i int) []LoadPoint {
	for _, d := range s.Devices {
		if d.Index == i {
			return d.Load
		}
	}
	return s.Load
}

// busy is the busy percent of points at t.
func busy(points []LoadPoint, t time.Duration) int {
	if len(points) == 0 {
		return 0
	}
	b := points[0].Busy
	for _, p := range points {
		if t >= p.At {
			b = p.Busy
		}
	}
	return b
}

// overlap is how long [from, from+d) (d 0: forever) and [0, t) share.
func overlap(from, d, t time.Duration) time.Duration {
	end := t
	if d > 0 {
		end = min(end, from+d)
	}
	return max(0, end-from)
}

// active tells whether a fault of duration d from from is in force at t.
func active(from, d, t time.Duration) bool { return t >= from && (d == 0 || t < from+d) }

// Node is the node's files at t since the start.
func (s *Scenario) Node(t time.Duration) Node {
	p := profiles[s.Profile]
	n := p.node
	for i := range p.gpus {
		points := s.loadOf(i)
		g := p.gpu(i, busy(points, t))
		m := g.Metrics.Values
		// The energy counter grows by each load's power over its time (1/65536 J units), the
		// accumulation counter by 1 per ms, as the SMU's do.
		m["energy_accumulator"] += uint64(joules(p, i, points, t) * 65536)
		m["accumulation_counter"] += uint64(t.Milliseconds())
		var used uint64
		for _, h := range s.Processes {
			if h.GPU == i {
				used += h.VRAMMiB << 20
			}
		}
		g.VRAMUsed = max(g.VRAMUsed, used+(2<<30))
		for _, f := range s.Faults {
			if f.GPU != i || t < f.At {
				continue
			}
			applyFault(&g, f, t)
		}
		n.GPUs = append(n.GPUs, g)
	}
	for _, h := range s.Processes {
		n.Processes = append(n.Processes, Process{PID: h.PID, GPU: h.GPU, VRAMBytes: h.VRAMMiB << 20})
	}
	return n
}

// joules is the energy GPU i used from the start to t, its power following its load.
func joules(p profile, i int, points []LoadPoint, t time.Duration) float64 {
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
func applyFault(g *GPU, f Fault, t time.Duration) {
	m := g.Metrics.Values
	switch f.Kind {
	case FaultRAS:
		c := g.RAS[f.Block]
		c.Corrected += f.Corrected
		c.Uncorrected += f.Uncorrected
		g.RAS[f.Block] = c
	case FaultPCIeDowngrade:
		if active(f.At, f.Duration, t) {
			if f.Width > 0 {
				g.LinkWidth = f.Width
				m["pcie_link_width"] = uint64(f.Width)
			}
			if f.Generation > 0 {
				g.LinkSpeed = linkSpeeds[f.Generation-1].sysfs
				m["pcie_link_speed"] = linkSpeeds[f.Generation-1].metric
			}
		}
	case FaultThrottle:
		// The counter counts the ms the limiter was engaged, like accumulation_counter.
		m[limiters[f.Limiter]] += uint64(overlap(f.At, f.Duration, t).Milliseconds())
		if active(f.At, f.Duration, t) {
			g.SclkLevel = 0
			m["current_gfxclk"] = uint64(g.SclkLevelsMHz[0])
		}
	case FaultGPULost:
		g.Gone = true
	}
}

// Start writes the node at the start under root, then again every tick in the background,
// until stop, which returns the first write that failed.
func (s *Scenario) Start(root string, tick time.Duration) (stop func() error, err error) {
	if err := Write(root, s.Node(0)); err != nil {
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
				if err := Write(root, s.Node(now.Sub(start))); err != nil && writeErr == nil {
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
