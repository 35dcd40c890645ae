// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package simulated runs go-nvml's mock DGX servers as an nvml.Interface whose readings follow a
// scenario file: signals over time per GPU, processes and injected faults.
package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is the content of a scenario file (documented in the receiver's README).
type Scenario struct {
	// Profile is the mock DGX server: dgxa100, dgxh100, dgxh200 or dgxb200.
	Profile string `yaml:"profile"`
	// GPUs overrides the profile's eight GPUs.
	GPUs int `yaml:"gpus"`
	// Model and MemoryMiB override the profile's product name and framebuffer size.
	Model     string `yaml:"model"`
	MemoryMiB uint64 `yaml:"memory_mib"`
	// Seed derives the UUIDs and the random walks, so a scenario always replays the same way.
	Seed int64 `yaml:"seed"`
	// Signals apply to every GPU unless a device entry overrides them.
	Signals Signals `yaml:"signals"`
	// Activity is what the GPUs' busy time is made of, as GPM measures it on Hopper and newer,
	// unless a device entry sets its own; without either, defaultActivity.
	Activity  *Activity   `yaml:"activity"`
	Devices   []DeviceSet `yaml:"devices"`
	Processes []Process   `yaml:"processes"`
	Faults    []Fault     `yaml:"faults"`
	MIG       []MIG       `yaml:"mig"`
}

// MIG puts a GPU in MIG mode with Instances equal instances, each of MemoryMiB with UsedMiB in
// use. A GPU in MIG mode reports no utilization, as NVML does; GPM measures each instance: the
// first Busy instances run at the GPU's utilization signal and activity, the others idle.
type MIG struct {
	GPU       int    `yaml:"gpu"`
	Instances int    `yaml:"instances"`
	MemoryMiB uint64 `yaml:"memory_mib"`
	UsedMiB   uint64 `yaml:"used_mib"`
	Busy      int    `yaml:"busy"`
}

// maxMIGInstances is what the largest MIG layouts (seven 1g slices) allow.
const maxMIGInstances = 7

// Signals are the readings that follow a function of time; memory is a percent of the
// framebuffer used on top of the processes' memory.
type Signals struct {
	Utilization *Signal `yaml:"utilization"`
	Memory      *Signal `yaml:"memory"`
	Temperature *Signal `yaml:"temperature"`
	Power       *Signal `yaml:"power"`
}

// DeviceSet overrides signals and the activity of one GPU.
type DeviceSet struct {
	Index    int       `yaml:"index"`
	Signals  Signals   `yaml:"signals"`
	Activity *Activity `yaml:"activity"`
}

// Activity is what a busy GPU's time is made of, as GPM measures it on Hopper and newer GPUs
// (the dgxa100 profile has no GPM). Each is a fraction from 0 to 1: SM and DRAM of the time the
// GPU is busy (its utilization signal), Occupancy of the warps an active SM can hold, the pipes
// (tensor operations by kind, non-tensor floating point by width) of the SMs' active time. A
// block replaces the scenario's whole; what it leaves out is 0. The tensor kinds together are
// the time any tensor pipe is active, up to all of it.
type Activity struct {
	SM        float64 `yaml:"sm"`
	Occupancy float64 `yaml:"occupancy"`
	HMMA      float64 `yaml:"hmma"`
	IMMA      float64 `yaml:"imma"`
	DFMA      float64 `yaml:"dfma"`
	FP64      float64 `yaml:"fp64"`
	FP32      float64 `yaml:"fp32"`
	FP16      float64 `yaml:"fp16"`
	DRAM      float64 `yaml:"dram"`
}

// defaultActivity is a mixed-precision training job's: most SMs busy while a kernel runs, half
// of them on HMMA tensor operations.
var defaultActivity = Activity{SM: 0.8, Occupancy: 0.5, HMMA: 0.5, FP32: 0.3, FP16: 0.2, DRAM: 0.4}

// Signal is exactly one of its shapes.
type Signal struct {
	Constant   *float64    `yaml:"constant"`
	Step       []StepPoint `yaml:"step"`
	Sine       *Sine       `yaml:"sine"`
	RandomWalk *RandomWalk `yaml:"random_walk"`
}

// StepPoint sets the value from At on; before the first point the first value holds.
type StepPoint struct {
	At    time.Duration `yaml:"at"`
	Value float64       `yaml:"value"`
}

// Sine oscillates between Min and Max.
type Sine struct {
	Min    float64       `yaml:"min"`
	Max    float64       `yaml:"max"`
	Period time.Duration `yaml:"period"`
	Phase  time.Duration `yaml:"phase"`
}

// RandomWalk moves by at most Step every Every, staying within [Min, Max], from the middle.
type RandomWalk struct {
	Min   float64       `yaml:"min"`
	Max   float64       `yaml:"max"`
	Step  float64       `yaml:"step"`
	Every time.Duration `yaml:"every"`
}

// Process holds memory and SM time on one GPU between From and Until (0: forever).
type Process struct {
	PID       uint32        `yaml:"pid"`
	GPU       int           `yaml:"gpu"`
	MemoryMiB uint64        `yaml:"memory_mib"`
	SM        uint32        `yaml:"sm"`
	From      time.Duration `yaml:"from"`
	Until     time.Duration `yaml:"until"`
	// WhileRunning lists the process only while PID runs on the host (its /proc entry under the
	// host root, see WithHostRoot, exists), as NVML lists a process until it exits: for a
	// scenario whose pids are real processes, such as the containers of a real node's pods.
	WhileRunning bool `yaml:"while_running"`
}

// Fault kinds.
const (
	FaultXID             = "xid"
	FaultGPULost         = "gpu_lost"
	FaultResetRequired   = "reset_required"
	FaultHang            = "hang"
	FaultECC             = "ecc"
	FaultRowRemapPending = "row_remap_pending"
	FaultRowRemapFailed  = "row_remap_failed"
	FaultPCIeDowngrade   = "pcie_downgrade"
	FaultThermalSlowdown = "thermal_slowdown"
	FaultFabricDown      = "fabric_down"
	FaultFabricDegraded  = "fabric_degraded"
	FaultNVLinkDown      = "nvlink_down"
	// FaultCollectiveWait: the GPU spends Share of its busy time spinning in NCCL's kernels,
	// waiting for its peers in a collective (a straggler's peers: part of it; a hung
	// collective: 1, all of it).
	FaultCollectiveWait = "collective_wait"
)

// xidFallenOffBus is the XID a GPU reports when it drops off the PCIe bus; NVML then answers
// ERROR_GPU_IS_LOST for it, so the simulation does the same.
const xidFallenOffBus = 79

// Fault happens on one GPU at At and, for state faults, lasts Duration (0: until the end).
type Fault struct {
	At       time.Duration `yaml:"at"`
	GPU      int           `yaml:"gpu"`
	Kind     string        `yaml:"kind"`
	Duration time.Duration `yaml:"duration"`
	// XID is the code of an xid fault; Message what its kernel log line says after the code
	// (an NVLink XID's unit, verdict and link), a generic text when empty.
	XID     uint64 `yaml:"xid"`
	Message string `yaml:"message"`
	// Link is the NVLink an nvlink_down fault takes down.
	Link int `yaml:"link"`
	// Corrected and Uncorrected are the ECC errors an ecc fault adds.
	Corrected   uint64 `yaml:"corrected"`
	Uncorrected uint64 `yaml:"uncorrected"`
	// Width and Generation are the PCIe link a pcie_downgrade fault trains at.
	Width      int `yaml:"width"`
	Generation int `yaml:"generation"`
	// Share is the part of its busy time a collective_wait fault's GPU spends waiting, 0-1.
	Share float64 `yaml:"share"`
}

// active reports whether a state fault is in force at t.
func (f *Fault) active(t time.Duration) bool {
	return t >= f.At && (f.Duration == 0 || t < f.At+f.Duration)
}

// LoadScenario reads and checks a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScenario(data)
}

// ParseScenario decodes a scenario strictly (unknown keys are errors, so typos do not pass
// silently) and checks it.
func ParseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if s.GPUs == 0 {
		s.GPUs = 8
	}
	// Faults are looked up in time order.
	sort.SliceStable(s.Faults, func(i, j int) bool { return s.Faults[i].At < s.Faults[j].At })
	return &s, s.validate()
}

// maxGPUs bounds a scenario to what one node can hold, with room for benchmarks.
const maxGPUs = 1024

func (s *Scenario) validate() error {
	var errs []error
	if _, ok := profiles[s.Profile]; !ok {
		errs = append(errs, fmt.Errorf("profile must be one of dgxa100, dgxh100, dgxh200, dgxb200, got %q", s.Profile))
	}
	if s.GPUs < 0 || s.GPUs > maxGPUs {
		errs = append(errs, fmt.Errorf("gpus must be between 1 and %d, got %d", maxGPUs, s.GPUs))
	}
	errs = append(errs, s.Signals.validate("signals")...)
	errs = append(errs, s.Activity.validate("activity")...)
	gpu := func(key string, i int) {
		if i < 0 || i >= s.GPUs {
			errs = append(errs, fmt.Errorf("%s: gpu index %d is outside 0..%d", key, i, s.GPUs-1))
		}
	}
	for i, d := range s.Devices {
		key := fmt.Sprintf("devices[%d]", i)
		gpu(key, d.Index)
		errs = append(errs, d.Signals.validate(key+".signals")...)
		errs = append(errs, d.Activity.validate(key+".activity")...)
	}
	for i, p := range s.Processes {
		key := fmt.Sprintf("processes[%d]", i)
		gpu(key, p.GPU)
		if p.PID == 0 {
			errs = append(errs, fmt.Errorf("%s: pid must be set", key))
		}
		if p.SM > 100 {
			errs = append(errs, fmt.Errorf("%s: sm is a percent, got %d", key, p.SM))
		}
	}
	for i, m := range s.MIG {
		key := fmt.Sprintf("mig[%d]", i)
		gpu(key, m.GPU)
		if m.Instances < 1 || m.Instances > maxMIGInstances {
			errs = append(errs, fmt.Errorf("%s: instances must be between 1 and %d, got %d", key, maxMIGInstances, m.Instances))
		}
		if m.MemoryMiB == 0 || m.UsedMiB > m.MemoryMiB {
			errs = append(errs, fmt.Errorf("%s: memory_mib must be positive and at least used_mib", key))
		}
		if m.Busy < 0 || m.Busy > m.Instances {
			errs = append(errs, fmt.Errorf("%s: busy must be between 0 and instances (%d), got %d", key, m.Instances, m.Busy))
		}
	}
	for i, f := range s.Faults {
		key := fmt.Sprintf("faults[%d]", i)
		gpu(key, f.GPU)
		if f.At < 0 || f.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: at and duration must not be negative", key))
		}
		switch f.Kind {
		case FaultXID:
			if f.XID == 0 {
				errs = append(errs, fmt.Errorf("%s: kind xid needs an xid code", key))
			}
		case FaultHang, FaultThermalSlowdown:
			if f.Duration == 0 {
				errs = append(errs, fmt.Errorf("%s: kind %s needs a duration", key, f.Kind))
			}
		case FaultECC:
			if f.Corrected == 0 && f.Uncorrected == 0 {
				errs = append(errs, fmt.Errorf("%s: kind ecc needs corrected or uncorrected errors", key))
			}
		case FaultPCIeDowngrade:
			if f.Width <= 0 && f.Generation <= 0 {
				errs = append(errs, fmt.Errorf("%s: kind pcie_downgrade needs a width or a generation", key))
			}
		case FaultNVLinkDown:
			switch p, ok := profiles[s.Profile]; {
			case f.Link < 0:
				errs = append(errs, fmt.Errorf("%s: kind nvlink_down needs a link number, got %d", key, f.Link))
			case ok && f.Link >= p.nvLinks: // an unknown profile is reported above
				errs = append(errs, fmt.Errorf("%s: %s GPUs have links 0 to %d, got %d", key, s.Profile, p.nvLinks-1, f.Link))
			}
		case FaultFabricDown, FaultFabricDegraded:
			if p, ok := profiles[s.Profile]; ok && !p.fabric {
				errs = append(errs, fmt.Errorf("%s: kind %s needs a profile with an NVSwitch fabric that NVML reports (dgxh100, dgxh200, dgxb200)", key, f.Kind))
			}
		case FaultCollectiveWait:
			if f.Share <= 0 || f.Share > 1 {
				errs = append(errs, fmt.Errorf("%s: kind collective_wait needs a share above 0 and at most 1 (1: a hung collective), got %v", key, f.Share))
			}
		case FaultGPULost, FaultResetRequired, FaultRowRemapPending, FaultRowRemapFailed:
		default:
			errs = append(errs, fmt.Errorf("%s: kind must be one of xid, gpu_lost, reset_required, hang, ecc, row_remap_pending, row_remap_failed, pcie_downgrade, thermal_slowdown, fabric_down, fabric_degraded, nvlink_down, collective_wait, got %q", key, f.Kind))
		}
		if f.Message != "" && (f.Kind != FaultXID || strings.ContainsAny(f.Message, "\r\n")) {
			errs = append(errs, fmt.Errorf("%s: message is one line of an xid fault", key))
		}
	}
	return errors.Join(errs...)
}

func (ss *Signals) validate(key string) []error {
	var errs []error
	for name, sig := range map[string]*Signal{"utilization": ss.Utilization, "memory": ss.Memory, "temperature": ss.Temperature, "power": ss.Power} {
		if sig == nil {
			continue
		}
		if err := sig.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", key, name, err))
		}
	}
	return errs
}

func (a *Activity) validate(key string) []error {
	if a == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"sm", a.SM},
		{"occupancy", a.Occupancy},
		{"hmma", a.HMMA},
		{"imma", a.IMMA},
		{"dfma", a.DFMA},
		{"fp64", a.FP64},
		{"fp32", a.FP32},
		{"fp16", a.FP16},
		{"dram", a.DRAM},
	} {
		if !(f.v >= 0 && f.v <= 1) { // NaN fails too
			errs = append(errs, fmt.Errorf("%s.%s: a fraction between 0 and 1, got %v", key, f.name, f.v))
		}
	}
	return errs
}

func (sig *Signal) validate() error {
	shapes := 0
	for _, set := range []bool{sig.Constant != nil, len(sig.Step) > 0, sig.Sine != nil, sig.RandomWalk != nil} {
		if set {
			shapes++
		}
	}
	if shapes != 1 {
		return errors.New("set exactly one of constant, step, sine, random_walk")
	}
	switch {
	case sig.Sine != nil:
		if sig.Sine.Period <= 0 || sig.Sine.Max < sig.Sine.Min {
			return errors.New("sine needs a positive period and max >= min")
		}
	case sig.RandomWalk != nil:
		w := sig.RandomWalk
		// every is at least a second: the walk advances one step per every, from the start.
		if w.Every < time.Second || w.Max < w.Min || w.Step <= 0 || math.IsNaN(w.Step) {
			return errors.New("random_walk needs every of at least 1s, a positive step and max >= min")
		}
	}
	return nil
}
