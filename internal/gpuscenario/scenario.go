// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpuscenario is the one format of a simulated GPU node of either vendor: its devices,
// their load over time, faults, processes and MIG slices, in a YAML file (distro/scenarios
// holds the shipped ones; distro/scenarios/README.md walks through the keys). One loader and
// one validator serve both simulations: the gpu receiver's simulated backend answers NVML from
// an NVIDIA scenario, internal/amdgpu/amdgpufixture writes an AMD scenario's driver files; and
// cmd/demonode reads the GPUs' identities from it.
//
// The profile names the node, and with it the vendor: dgxa100, dgxh100, dgxh200 and dgxb200
// are NVIDIA's (go-nvml's mock DGX servers), mi300x is AMD's. A scenario can start from a real
// capture: capture names an `nvidia-smi -q -x` dump (NVIDIA) or a KFD topology directory
// (/sys/class/kfd/kfd/topology, AMD), relative to the scenario file; the capture gives the
// devices (their number, model, UUID, memory, PCI address, clocks and power limits as the
// capture records them) and the scenario's load and faults play on top.
//
// Keys, with the vendors that read them:
//
//	profile     both    the node, above
//	capture     both    a capture to take the devices from
//	gpus        both    the number of GPUs (default: the profile's 8; a capture's count)
//	model       NVIDIA  the product name, instead of the profile's
//	memory_mib  NVIDIA  the framebuffer, instead of the profile's
//	seed        NVIDIA  derives the UUIDs and random walks, so a run replays the same way
//	signals     both    utilization, memory, temperature, power over time, for every GPU; a
//	                    signal is one of constant, step, sine, random_walk. AMD: utilization
//	                    only, constant or step (the driver's files follow the load)
//	activity    NVIDIA  what the busy time is made of, as GPM measures it
//	devices     both    per GPU (index): its own signals and activity
//	processes   both    pid, gpu, memory_mib; NVIDIA also sm, from, until, while_running
//	mig         NVIDIA  MIG slices of a GPU
//	faults      both    at, gpu, kind and the kind's fields; the kinds are the vendor's
//
// Errors name the key at fault by its YAML path: `faults[3].gpu: 9 is not a device (the node
// has 8)`.
package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
)

// Scenario is the content of a scenario file.
type Scenario struct {
	// Profile is the node: dgxa100, dgxh100, dgxh200, dgxb200 (NVIDIA) or mi300x (AMD).
	Profile string `yaml:"profile"`
	// Capture is a real node's capture the devices come from, relative to the scenario file.
	Capture string `yaml:"capture"`
	// GPUs overrides the profile's eight GPUs; Load sets it to the count in force.
	GPUs int `yaml:"gpus"`
	// Model and MemoryMiB override the profile's product name and framebuffer size.
	Model     string `yaml:"model"`
	MemoryMiB uint64 `yaml:"memory_mib"`
	// Seed derives the UUIDs and the random walks, so a scenario always replays the same way.
	Seed int64 `yaml:"seed"`
	// Signals apply to every GPU unless a device entry overrides them.
	Signals Signals `yaml:"signals"`
	// Activity is what the GPUs' busy time is made of, as GPM measures it on Hopper and newer,
	// unless a device entry sets its own; without either, DefaultActivity.
	Activity  *Activity `yaml:"activity"`
	Devices   []Device  `yaml:"devices"`
	Processes []Process `yaml:"processes"`
	Faults    []Fault   `yaml:"faults"`
	MIG       []MIG     `yaml:"mig"`

	// Captured are the devices read from Capture, one per GPU; nil without a capture.
	Captured []CapturedGPU `yaml:"-"`
}

// Vendor is whose GPUs a profile has.
type Vendor string

// Vendors.
const (
	NVIDIA Vendor = "nvidia"
	AMD    Vendor = "amd"
)

// Profile is what a scenario's profile fixes beyond its GPUs' readings.
type Profile struct {
	Vendor Vendor
	// GPUs is the node's GPU count unless the scenario sets one; MaxGPUs the most it can set.
	GPUs, MaxGPUs int
	// NVLinks is the number of NVLinks per GPU; Fabric: the GPUs register with an NVSwitch
	// fabric that NVML reports (Hopper and newer; an A100's is not reported through NVML).
	NVLinks int
	Fabric  bool
}

// defaultGPUs is a node's GPU count when neither the scenario nor its profile gives one.
const defaultGPUs = 8

// maxGPUs bounds a simulated NVIDIA node to what one node can hold, with room for benchmarks.
const maxGPUs = 1024

// profiles are the nodes a scenario can describe. An mi300x node's GPUs have fixed PCI
// addresses (amdgpufixture.MI300XGPU), eight of them.
var profiles = map[string]Profile{
	"dgxa100": {Vendor: NVIDIA, GPUs: 8, MaxGPUs: maxGPUs, NVLinks: 12},
	"dgxh100": {Vendor: NVIDIA, GPUs: 8, MaxGPUs: maxGPUs, NVLinks: 18, Fabric: true},
	"dgxh200": {Vendor: NVIDIA, GPUs: 8, MaxGPUs: maxGPUs, NVLinks: 18, Fabric: true},
	"dgxb200": {Vendor: NVIDIA, GPUs: 8, MaxGPUs: maxGPUs, NVLinks: 18, Fabric: true},
	"mi300x":  {Vendor: AMD, GPUs: 8, MaxGPUs: 8},
}

// profileNames is the profiles' list for errors.
const profileNames = "dgxa100, dgxh100, dgxh200, dgxb200 (NVIDIA) or mi300x (AMD)"

// ProfileOf is the scenario's profile; ok false for a name no profile has (Load rejects it).
func (s *Scenario) ProfileOf() (Profile, bool) {
	p, ok := profiles[s.Profile]
	return p, ok
}

// Vendor is the vendor of the scenario's profile.
func (s *Scenario) Vendor() Vendor { return profiles[s.Profile].Vendor }

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

// MaxMIGInstances is what the largest MIG layouts (seven 1g slices) allow.
const MaxMIGInstances = 7

// Signals are the readings that follow a function of time; memory is a percent of the
// framebuffer used on top of the processes' memory.
type Signals struct {
	Utilization *Signal `yaml:"utilization"`
	Memory      *Signal `yaml:"memory"`
	Temperature *Signal `yaml:"temperature"`
	Power       *Signal `yaml:"power"`
}

// merged is s with over's signals in place of those it sets.
func (s Signals) merged(over Signals) Signals {
	pick := func(a, b *Signal) *Signal {
		if b != nil {
			return b
		}
		return a
	}
	return Signals{
		Utilization: pick(s.Utilization, over.Utilization),
		Memory:      pick(s.Memory, over.Memory),
		Temperature: pick(s.Temperature, over.Temperature),
		Power:       pick(s.Power, over.Power),
	}
}

// Device overrides the signals and the activity of one GPU.
type Device struct {
	Index    int       `yaml:"index"`
	Signals  Signals   `yaml:"signals"`
	Activity *Activity `yaml:"activity"`
}

// SignalsOf are GPU i's signals: the scenario's, with its device entries' in their place.
func (s *Scenario) SignalsOf(i int) Signals {
	sig := s.Signals
	for _, d := range s.Devices {
		if d.Index == i {
			sig = sig.merged(d.Signals)
		}
	}
	return sig
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

// DefaultActivity is a mixed-precision training job's: most SMs busy while a kernel runs, half
// of them on HMMA tensor operations.
var DefaultActivity = Activity{SM: 0.8, Occupancy: 0.5, HMMA: 0.5, FP32: 0.3, FP16: 0.2, DRAM: 0.4}

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

// Process holds memory (and on NVIDIA, SM time) on one GPU between From and Until (0:
// forever).
type Process struct {
	PID       uint32        `yaml:"pid"`
	GPU       int           `yaml:"gpu"`
	MemoryMiB uint64        `yaml:"memory_mib"`
	SM        uint32        `yaml:"sm"`
	From      time.Duration `yaml:"from"`
	Until     time.Duration `yaml:"until"`
	// WhileRunning lists the process only while PID runs on the host (its /proc entry under the
	// host root exists), as NVML lists a process until it exits: for a scenario whose pids are
	// real processes, such as the containers of a real node's pods.
	WhileRunning bool `yaml:"while_running"`
}

// Active tells whether the process holds its GPU at t (WhileRunning aside).
func (p *Process) Active(t time.Duration) bool {
	return t >= p.From && (p.Until == 0 || t < p.Until)
}

// Fault kinds of both vendors.
const (
	// FaultGPULost: the GPU falls off the bus (NVML answers GPU_IS_LOST; an AMD GPU's files go).
	FaultGPULost = "gpu_lost"
	// FaultPCIeDowngrade: the link trains at Width lanes and/or Generation.
	FaultPCIeDowngrade = "pcie_downgrade"
)

// NVIDIA fault kinds.
const (
	FaultXID             = "xid"
	FaultResetRequired   = "reset_required"
	FaultHang            = "hang"
	FaultECC             = "ecc"
	FaultRowRemapPending = "row_remap_pending"
	FaultRowRemapFailed  = "row_remap_failed"
	FaultThermalSlowdown = "thermal_slowdown"
	FaultFabricDown      = "fabric_down"
	FaultFabricDegraded  = "fabric_degraded"
	FaultNVLinkDown      = "nvlink_down"
	// FaultRecoveryAction: the driver says the GPU needs Action (NVML's GPU recovery action,
	// field 230, with its event), for Duration (0: until the end), none otherwise.
	FaultRecoveryAction = "recovery_action"
	// FaultCollectiveWait: the GPU spends Share of its busy time spinning in NCCL's kernels,
	// waiting for its peers in a collective (a straggler's peers: part of it; a hung
	// collective: 1, all of it).
	FaultCollectiveWait = "collective_wait"
)

// AMD fault kinds.
const (
	// FaultRAS adds RAS errors to a block's counts (ras/<block>_err_count).
	FaultRAS = "ras"
	// FaultThrottle makes a limiter's residency counter of gpu_metrics grow for Duration (0:
	// until the end), with the clock at its lowest level.
	FaultThrottle = "throttle"
)

// Limiters of a throttle fault.
var Limiters = []string{"prochot", "ppt", "socket_thermal", "vr_thermal", "hbm_thermal"}

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
	// Corrected and Uncorrected are the errors an ecc or ras fault adds; Block is a ras fault's
	// RAS block (umc: HBM).
	Corrected   uint64 `yaml:"corrected"`
	Uncorrected uint64 `yaml:"uncorrected"`
	Block       string `yaml:"block"`
	// Width and Generation are the PCIe link a pcie_downgrade fault trains at.
	Width      int `yaml:"width"`
	Generation int `yaml:"generation"`
	// Share is the part of its busy time a collective_wait fault's GPU spends waiting, 0-1.
	Share float64 `yaml:"share"`
	// Limiter is a throttle fault's: prochot, ppt, socket_thermal, vr_thermal or hbm_thermal.
	Limiter string `yaml:"limiter"`
	// Action is a recovery_action fault's, by its name in package recoveryaction (node_reboot).
	Action string `yaml:"action"`
}

// RecoveryAction is a recovery_action fault's action (validated).
func (f *Fault) RecoveryAction() recoveryaction.Action {
	a, _ := recoveryaction.Parse(f.Action)
	return a
}

// Active reports whether a state fault is in force at t.
func (f *Fault) Active(t time.Duration) bool {
	return t >= f.At && (f.Duration == 0 || t < f.At+f.Duration)
}

// Load reads a scenario file, and its capture relative to the file's directory, and checks
// them; errors name the key, the caller the file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, filepath.Dir(path))
}

// Parse decodes a scenario strictly (unknown keys are errors, so typos do not pass silently),
// reads its capture relative to dir, and checks it.
func Parse(data []byte, dir string) (*Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	p, known := profiles[s.Profile]
	if s.Capture != "" && known {
		path := s.Capture
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		captured, err := readCapture(p.Vendor, path)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		if s.GPUs != 0 && s.GPUs != len(captured) {
			return nil, fmt.Errorf("gpus: %d, but the capture has %d; leave gpus out", s.GPUs, len(captured))
		}
		s.Captured, s.GPUs = captured, len(captured)
	}
	if s.GPUs == 0 {
		s.GPUs = defaultGPUs
		if known {
			s.GPUs = p.GPUs
		}
	}
	// Faults are looked up in time order.
	sort.SliceStable(s.Faults, func(i, j int) bool { return s.Faults[i].At < s.Faults[j].At })
	return &s, s.validate()
}

// UUID is GPU i's UUID: the capture's, or derived from the seed so series keep their identity
// from one run to the next. An AMD GPU's is the driver's unique_id (amdgpufixture's).
func (s *Scenario) UUID(i int) string {
	if i < len(s.Captured) && s.Captured[i].UUID != "" {
		return s.Captured[i].UUID
	}
	return derivedUUID(s.Seed, i)
}

// MIGUUIDs are the UUIDs of GPU i's MIG instances, in slot order; none when it is not in MIG
// mode.
func (s *Scenario) MIGUUIDs(i int) []string {
	var uuids []string
	for _, m := range s.MIG {
		if m.GPU != i {
			continue
		}
		for k := range m.Instances {
			uuids = append(uuids, "MIG-"+derivedUUID(s.Seed, (i+1)*maxGPUs+k)[len("GPU-"):])
		}
	}
	return uuids
}

// PCIAddress is GPU i's PCI address: the capture's, or bus i+1 (and the next domain every 255
// GPUs, for large benchmarks).
func (s *Scenario) PCIAddress(i int) PCIAddress {
	if i < len(s.Captured) {
		return s.Captured[i].PCI
	}
	return PCIAddress{Domain: uint32(i / 255), Bus: uint8(i%255 + 1)}
}
