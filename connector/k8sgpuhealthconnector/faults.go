// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// Action is what a fault calls for: the recommended action in the node's condition and Events.
type Action string

// Actions, by how much of the node they take out of service.
const (
	// ActionResetGPU: drain the GPU's jobs and reset it.
	ActionResetGPU Action = "reset_gpu"
	// ActionReboot: drain and reboot the node.
	ActionReboot Action = "reboot"
	// ActionCheckNVLink: drain the node and check the NVLink/NVSwitch fabric.
	ActionCheckNVLink Action = "check_nvlink"
	// ActionInspectHardware: drain the node and have the GPU inspected or replaced.
	ActionInspectHardware Action = "inspect_hardware"
)

// Actions are the values an Action may take.
var Actions = []Action{ActionResetGPU, ActionReboot, ActionCheckNVLink, ActionInspectHardware}

// Validate accepts one of Actions.
func (a Action) Validate() error { return enum.Check(a, Actions) }

// rank orders actions by how much they take out of service: a reset takes one GPU, a reboot or
// a fabric check the node, an inspection the node for as long as a repair takes.
func (a Action) rank() int {
	switch a {
	case ActionResetGPU:
		return 1
	case ActionReboot, ActionCheckNVLink:
		return 2
	case ActionInspectHardware:
		return 3
	}
	return 0
}

// words say what an operator does. The XID classes' wording is the XID table's, which the GPU
// report and the agents' log records use too.
func (a Action) words() string {
	if a == ActionInspectHardware {
		return "drain the node and have the GPU inspected: reseat or replace it (a reset will not repair it)"
	}
	return xid.Resolution(a).Action()
}

// severityRank orders severities, mildest first.
func severityRank(s xid.Severity) int {
	for i, v := range xid.Severities {
		if v == s {
			return i
		}
	}
	return -1
}

// faultKind describes one kind of fault: how the agents show it and what it calls for.
type faultKind struct {
	kind metadata.AttributeFault
	// reason is the condition's and the Event's reason.
	reason string
	// what says what the fault is, after the GPU it is on.
	what     string
	action   Action
	severity xid.Severity
	// config is the kind's setting; nil for XIDs (faults::xid_resolutions).
	config func(*FaultsConfig) *StateFault
	// condition is the gpu_health condition whose level shows the fault (shows says which
	// levels do); gpuCount for gpu_missing.
	condition string
	shows     func(level int64) bool
}

// gpuCount stands for the node-level comparison of gpu_devices_detected with
// configured_gpu_count, beside gpu_health's conditions.
const gpuCount = "gpu_count"

// faultKinds in the order the condition's message lists them at equal rank. gpu_health's
// levels are the gpu receiver's: 0 ok, 1 warning, 2 fatal.
var faultKinds = []faultKind{
	{kind: metadata.AttributeFaultXid, reason: "XIDError"},
	{
		kind: metadata.AttributeFaultGpuLost, reason: "GPULost", what: "lost: NVML reports the GPU lost or needing a reset",
		action: ActionReboot, severity: xid.SeverityFatal, config: func(f *FaultsConfig) *StateFault { return &f.GPULost },
		condition: "nvml", shows: func(l int64) bool { return l >= 2 },
	},
	{
		kind: metadata.AttributeFaultGpuMissing, reason: "GPUMissing", what: "fewer GPUs than configured_gpu_count",
		action: ActionReboot, severity: xid.SeverityFatal, config: func(f *FaultsConfig) *StateFault { return &f.GPUMissing },
		condition: gpuCount, shows: func(l int64) bool { return l > 0 },
	},
	{
		kind: metadata.AttributeFaultDriverHang, reason: "DriverHung", what: "hung: NVML calls on the GPU do not return",
		action: ActionReboot, severity: xid.SeverityFatal, config: func(f *FaultsConfig) *StateFault { return &f.DriverHang },
		condition: "nvml", shows: func(l int64) bool { return l == 1 },
	},
	{
		kind: metadata.AttributeFaultRowRemapFailed, reason: "RowRemapFailed", what: "a memory row remapping failed",
		action: ActionInspectHardware, severity: xid.SeverityFatal, config: func(f *FaultsConfig) *StateFault { return &f.RowRemapFailed },
		condition: "row_remap", shows: func(l int64) bool { return l >= 2 },
	},
	{
		kind: metadata.AttributeFaultDoubleBitEcc, reason: "DoubleBitECCError", what: "uncorrected (double-bit) ECC errors since the driver was loaded",
		action: ActionResetGPU, severity: xid.SeverityWarning, config: func(f *FaultsConfig) *StateFault { return &f.DoubleBitECC },
		condition: "memory_ecc", shows: func(l int64) bool { return l >= 1 },
	},
	{
		kind: metadata.AttributeFaultRowRemapPending, reason: "RowRemapPending", what: "a memory row remapping waits for a GPU reset",
		action: ActionResetGPU, severity: xid.SeverityWarning, config: func(f *FaultsConfig) *StateFault { return &f.RowRemapPending },
		condition: "row_remap", shows: func(l int64) bool { return l == 1 },
	},
	{
		kind: metadata.AttributeFaultRetiredPagesPending, reason: "RetiredPagesPending", what: "a page retirement waits for a GPU reset",
		action: ActionResetGPU, severity: xid.SeverityWarning, config: func(f *FaultsConfig) *StateFault { return &f.RetiredPagesPending },
		condition: "retired_pages", shows: func(l int64) bool { return l >= 1 },
	},
	{
		kind: metadata.AttributeFaultPcieDowngrade, reason: "PCIeLinkDegraded", what: "the PCIe link runs below its width or generation",
		action: ActionInspectHardware, severity: xid.SeverityWarning, config: func(f *FaultsConfig) *StateFault { return &f.PCIeDowngrade },
		condition: "pcie_link", shows: func(l int64) bool { return l >= 1 },
	},
	{
		kind: metadata.AttributeFaultNvlinkFabric, reason: "NVLinkFabricUnhealthy", what: "an NVLink is down, or the GPU's NVLink fabric is not registered or unhealthy",
		action: ActionCheckNVLink, severity: xid.SeverityWarning, config: func(f *FaultsConfig) *StateFault { return &f.NVLinkFabric },
		condition: "nvlink", shows: func(l int64) bool { return l >= 1 },
	},
}

// kindOf is the description of k, one of faultKinds.
func kindOf(k metadata.AttributeFault) *faultKind { return &faultKinds[kindIndex(k)] }

// faultKey names one fault of a node: a state of a GPU, or one XID code on a GPU. gpu is the
// GPU's UUID, or #<minor number> for a GPU lost before its UUID was read; empty for the node's
// own faults (gpu_missing, and an XID carried over from before a restart).
type faultKey struct {
	gpu  string
	kind metadata.AttributeFault
	code uint64
}

// fault is one fault of a node, open or (a state that has not lasted its `for` yet) not.
type fault struct {
	faultKey
	minor string
	what  string
	// action is what the fault calls for: the driver's recovery action for the GPU where it asks
	// for one (driver), else ours, the fault kind's or the XID's class.
	action   Action
	ours     Action
	driver   recoveryaction.Action
	severity xid.Severity
	// since and seen are the data's times of the first and of the latest evidence.
	since, seen time.Time
	// open: it calls for action. XIDs are open at once, states once they have lasted `for`.
	open bool
	// sticky faults are not reported again while they last (an XID happened once): they clear
	// when the node reboots or a person marks its faults resolved, never from the data.
	sticky bool
}

// eventKey is the fault's Event's key: its node, kind, GPU and XID code.
func (f *fault) eventKey(prefix string) string {
	return prefix + f.kind.String() + "/" + f.gpu + "/" + strconv.FormatUint(f.code, 10)
}

// gpuName is how messages name the fault's GPU.
func (f *fault) gpuName() string {
	switch {
	case f.gpu == "":
		return "the node"
	case f.gpu[0] == '#':
		return "GPU " + f.minor
	}
	return fmt.Sprintf("GPU %s (%s)", f.minor, f.gpu)
}

// describe is the fault in words: the GPU and what. No time: the condition's message stays the
// same while the same faults are open (a writer that restarts, a repeat, write nothing), and the
// Events and the condition's transition carry the times.
func (f *fault) describe() string {
	if f.driver != recoveryaction.None {
		return f.gpuName() + ": " + f.what + " (driver recovery action: " + f.driver.Words() + ")"
	}
	return f.gpuName() + ": " + f.what
}

// driverClasses are the action classes of the driver's recovery actions (gpu_recovery_action):
// a GPU reset in any form takes the GPU, a reboot the node, the peer-to-peer and IMEX domain
// actions the node's NVLink fabric. None, and a value a newer driver added, say nothing.
var driverClasses = map[recoveryaction.Action]Action{
	recoveryaction.GPUReset:          ActionResetGPU,
	recoveryaction.DrainAndReset:     ActionResetGPU,
	recoveryaction.BusReset:          ActionResetGPU,
	recoveryaction.NodeReboot:        ActionReboot,
	recoveryaction.SystemReboot:      ActionReboot,
	recoveryaction.DrainP2P:          ActionCheckNVLink,
	recoveryaction.RecoverIMEXDomain: ActionCheckNVLink,
}

// takeDriver sets the fault's action from the driver's recovery action for its GPU when the
// driver asks for one (a driver-said reboot is a reboot even for an XID we class as a reset),
// from ours otherwise. It reports whether the action changed.
func (f *fault) takeDriver(driver recoveryaction.Action) bool {
	if f.ours == "" {
		f.ours = f.action
	}
	before := f.action
	if class, ok := driverClasses[driver]; ok {
		f.action, f.driver = class, driver
	} else {
		f.action, f.driver = f.ours, recoveryaction.None
	}
	return f.action != before
}

// before orders faults as the condition lists them: sticky ones first (the reason names an XID
// while one is open, which is how a writer that restarts knows one is, since it is never
// reported again), then by action, severity, age, GPU and kind.
func (f *fault) before(g *fault) bool {
	if f.sticky != g.sticky {
		return f.sticky
	}
	if f.action.rank() != g.action.rank() {
		return f.action.rank() > g.action.rank()
	}
	if severityRank(f.severity) != severityRank(g.severity) {
		return severityRank(f.severity) > severityRank(g.severity)
	}
	if !f.since.Equal(g.since) {
		return f.since.Before(g.since)
	}
	if f.gpu != g.gpu {
		return f.gpu < g.gpu
	}
	if f.kind != g.kind {
		return kindIndex(f.kind) < kindIndex(g.kind)
	}
	return f.code < g.code
}

func kindIndex(k metadata.AttributeFault) int {
	return slices.IndexFunc(faultKinds, func(fk faultKind) bool { return fk.kind == k })
}
