// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
)

// MaxPCIeGeneration is the newest PCIe generation a pcie_downgrade can train at (Gen5: the
// profiles' GPUs' own).
const MaxPCIeGeneration = 5

// faultKinds are each vendor's fault kinds, in the order errors list them.
var faultKinds = map[Vendor][]string{
	NVIDIA: {
		FaultXID, FaultGPULost, FaultResetRequired, FaultHang, FaultECC, FaultRowRemapPending, FaultRowRemapFailed,
		FaultPCIeDowngrade, FaultThermalSlowdown, FaultFabricDown, FaultFabricDegraded, FaultNVLinkDown, FaultCollectiveWait,
		FaultRecoveryAction,
	},
	AMD: {FaultRAS, FaultPCIeDowngrade, FaultThrottle, FaultGPULost},
}

// validator gathers a scenario's errors, each naming its key.
type validator struct {
	s       *Scenario
	profile Profile
	errs    []error
}

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// gpu checks that key names one of the node's GPUs.
func (v *validator) gpu(key string, i int) {
	if i < 0 || i >= v.s.GPUs {
		v.fail(key, "%d is not a device (the node has %d)", i, v.s.GPUs)
	}
}

// nvidiaOnly rejects a key the AMD simulation does not play, so that it does not pass as if it
// did.
func (v *validator) nvidiaOnly(key string, set bool) {
	if set && v.profile.Vendor == AMD {
		v.fail(key, "the AMD simulation (profile %s) does not play it; remove it", v.s.Profile)
	}
}

func (s *Scenario) validate() error {
	p, ok := profiles[s.Profile]
	v := &validator{s: s, profile: p}
	if !ok {
		// The rest is checked as far as it can be without the vendor.
		v.fail("profile", "must be one of %s, got %q", profileNames, s.Profile)
		v.profile = Profile{GPUs: defaultGPUs, MaxGPUs: maxGPUs}
	}
	if s.GPUs < 1 || s.GPUs > v.profile.MaxGPUs {
		v.fail("gpus", "must be between 1 and %d, got %d", v.profile.MaxGPUs, s.GPUs)
	}
	v.nvidiaOnly("model", s.Model != "")
	v.nvidiaOnly("memory_mib", s.MemoryMiB != 0)
	v.nvidiaOnly("seed", s.Seed != 0)
	if s.Captured != nil && (s.Model != "" || s.MemoryMiB != 0) {
		v.fail("capture", "the capture gives the model and memory; remove model and memory_mib")
	}
	v.signals("signals", &s.Signals)
	v.activity("activity", s.Activity)
	for i, d := range s.Devices {
		key := fmt.Sprintf("devices[%d]", i)
		v.gpu(key+".index", d.Index)
		v.signals(key+".signals", &d.Signals)
		v.activity(key+".activity", d.Activity)
	}
	for i, proc := range s.Processes {
		v.process(fmt.Sprintf("processes[%d]", i), &proc)
	}
	for i, m := range s.MIG {
		v.mig(fmt.Sprintf("mig[%d]", i), m)
	}
	for i := range s.Faults {
		v.fault(fmt.Sprintf("faults[%d]", i), &s.Faults[i])
	}
	return errors.Join(v.errs...)
}

func (v *validator) signals(key string, ss *Signals) {
	for _, sig := range []struct {
		name string
		s    *Signal
	}{{"utilization", ss.Utilization}, {"memory", ss.Memory}, {"temperature", ss.Temperature}, {"power", ss.Power}} {
		if sig.s == nil {
			continue
		}
		k := key + "." + sig.name
		if sig.name != "utilization" {
			v.nvidiaOnly(k, true)
		}
		if err := sig.s.validate(); err != nil {
			v.fail(k, "%v", err)
			continue
		}
		if v.profile.Vendor == AMD && sig.name == "utilization" {
			v.amdLoad(k, sig.s)
		}
	}
}

// amdLoad checks an AMD GPU's load: the driver's gpu_busy_percent, a whole percent, and the
// energy counter integrates it, which a constant or step signal allows exactly.
func (v *validator) amdLoad(key string, sig *Signal) {
	if sig.Sine != nil || sig.RandomWalk != nil {
		v.fail(key, "the AMD simulation plays a constant or step load")
		return
	}
	values := []float64{}
	if sig.Constant != nil {
		values = append(values, *sig.Constant)
	}
	for _, p := range sig.Step {
		values = append(values, p.Value)
	}
	for _, value := range values {
		if !(value >= 0 && value <= 100) {
			v.fail(key, "busy is a percent, got %v", value)
		}
	}
}

func (v *validator) activity(key string, a *Activity) {
	if a == nil {
		return
	}
	v.nvidiaOnly(key, true)
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
			v.fail(key+"."+f.name, "a fraction between 0 and 1, got %v", f.v)
		}
	}
}

func (v *validator) process(key string, p *Process) {
	v.gpu(key+".gpu", p.GPU)
	if p.PID == 0 {
		v.fail(key+".pid", "must be set")
	}
	if p.SM > 100 {
		v.fail(key+".sm", "is a percent, got %d", p.SM)
	}
	if p.From < 0 || p.Until < 0 {
		v.fail(key, "from and until must not be negative")
	}
	// The KFD gives no per-process utilization, and the fixture writes every process's VRAM
	// file from the start.
	v.nvidiaOnly(key+".sm", p.SM != 0)
	v.nvidiaOnly(key+".from", p.From != 0)
	v.nvidiaOnly(key+".until", p.Until != 0)
	v.nvidiaOnly(key+".while_running", p.WhileRunning)
}

func (v *validator) mig(key string, m MIG) {
	v.nvidiaOnly(key, true)
	v.gpu(key+".gpu", m.GPU)
	if m.Instances < 1 || m.Instances > MaxMIGInstances {
		v.fail(key+".instances", "must be between 1 and %d, got %d", MaxMIGInstances, m.Instances)
	}
	if m.MemoryMiB == 0 || m.UsedMiB > m.MemoryMiB {
		v.fail(key+".memory_mib", "must be positive and at least used_mib")
	}
	if m.Busy < 0 || m.Busy > m.Instances {
		v.fail(key+".busy", "must be between 0 and instances (%d), got %d", m.Instances, m.Busy)
	}
}

func (v *validator) fault(key string, f *Fault) {
	v.gpu(key+".gpu", f.GPU)
	if f.At < 0 || f.Duration < 0 {
		v.fail(key, "at and duration must not be negative")
	}
	kinds := faultKinds[v.profile.Vendor]
	if v.profile.Vendor == "" { // an unknown profile: any vendor's
		kinds = slices.Clone(faultKinds[NVIDIA])
		for _, k := range faultKinds[AMD] {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	if !slices.Contains(kinds, f.Kind) {
		v.fail(key+".kind", "must be one of %s (profile %s), got %q", strings.Join(kinds, ", "), v.s.Profile, f.Kind)
		return
	}
	switch f.Kind {
	case FaultXID:
		if f.XID == 0 {
			v.fail(key, "kind xid needs an xid code")
		}
	case FaultHang, FaultThermalSlowdown:
		if f.Duration == 0 {
			v.fail(key, "kind %s needs a duration", f.Kind)
		}
	case FaultECC:
		if f.Corrected == 0 && f.Uncorrected == 0 {
			v.fail(key, "kind ecc needs corrected or uncorrected errors")
		}
	case FaultRAS:
		if f.Block == "" || f.Corrected == 0 && f.Uncorrected == 0 {
			v.fail(key, "kind ras needs a block and corrected or uncorrected errors")
		}
	case FaultPCIeDowngrade:
		if f.Width <= 0 && (f.Generation <= 0 || f.Generation > MaxPCIeGeneration) {
			v.fail(key, "kind pcie_downgrade needs a width or a generation from 1 to %d", MaxPCIeGeneration)
		}
	case FaultNVLinkDown:
		switch {
		case f.Link < 0:
			v.fail(key, "kind nvlink_down needs a link number, got %d", f.Link)
		case f.Link >= v.profile.NVLinks && v.profile.Vendor != "":
			v.fail(key+".link", "%s GPUs have links 0 to %d, got %d", v.s.Profile, v.profile.NVLinks-1, f.Link)
		}
	case FaultFabricDown, FaultFabricDegraded:
		if !v.profile.Fabric && v.profile.Vendor != "" {
			v.fail(key, "kind %s needs a profile with an NVSwitch fabric that NVML reports (dgxh100, dgxh200, dgxb200)", f.Kind)
		}
	case FaultCollectiveWait:
		if f.Share <= 0 || f.Share > 1 {
			v.fail(key, "kind collective_wait needs a share above 0 and at most 1 (1: a hung collective), got %v", f.Share)
		}
	case FaultThrottle:
		if !slices.Contains(Limiters, f.Limiter) {
			v.fail(key, "kind throttle needs a limiter: %s, got %q", strings.Join(Limiters, ", "), f.Limiter)
		}
	case FaultRecoveryAction:
		if a, ok := recoveryaction.Parse(f.Action); !ok || a == recoveryaction.None {
			v.fail(key+".action", "kind recovery_action needs an action: %s, got %q", strings.Join(recoveryaction.Names()[1:], ", "), f.Action)
		}
	}
	if f.Action != "" && f.Kind != FaultRecoveryAction {
		v.fail(key+".action", "is a recovery_action fault's")
	}
	if f.Message != "" && (f.Kind != FaultXID || strings.ContainsAny(f.Message, "\r\n")) {
		v.fail(key+".message", "is one line of an xid fault")
	}
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
	case len(sig.Step) > 0:
		for i, p := range sig.Step {
			if p.At < 0 {
				return fmt.Errorf("step[%d]: at must not be negative, got %s", i, p.At)
			}
		}
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
