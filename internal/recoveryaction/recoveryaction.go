// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package recoveryaction names the eight values of NVML's GPU recovery action
// (nvmlDeviceGpuRecoveryAction_t, field FI_DEV_GET_GPU_RECOVERY_ACTION, R565 and later drivers):
// what the driver itself says a GPU needs. The gpu receiver reports the value as
// gpu_recovery_action, the simulation plays it from a scenario's recovery_action fault, and the
// health connector names it in its Events; each takes the names and words from here.
package recoveryaction // import "github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"

import "strconv"

// Action is a GPU recovery action, by NVML's number for it.
type Action int64

// The actions, with NVML's numbers (NVML_GPU_RECOVERY_ACTION_*).
const (
	None Action = iota
	GPUReset
	NodeReboot
	DrainP2P
	DrainAndReset
	RecoverIMEXDomain
	BusReset
	SystemReboot
)

// All are the actions NVML defines, in NVML's order.
var All = []Action{None, GPUReset, NodeReboot, DrainP2P, DrainAndReset, RecoverIMEXDomain, BusReset, SystemReboot}

var names = map[Action]struct{ name, words string }{
	None:              {"none", "none needed"},
	GPUReset:          {"gpu_reset", "GPU reset"},
	NodeReboot:        {"node_reboot", "node reboot"},
	DrainP2P:          {"drain_p2p", "drain peer-to-peer traffic"},
	DrainAndReset:     {"drain_and_reset", "drain peer-to-peer traffic and reset the GPU"},
	RecoverIMEXDomain: {"recover_imex_domain", "recover the IMEX domain"},
	BusReset:          {"bus_reset", "reset the GPU's PCIe bus"},
	SystemReboot:      {"system_reboot", "system reboot"},
}

// Known reports whether a is one of All: a newer driver may report a value this build does not
// know.
func (a Action) Known() bool {
	_, ok := names[a]
	return ok
}

// String is the action's name (node_reboot), or its number for one a newer driver added.
func (a Action) String() string {
	if n, ok := names[a]; ok {
		return n.name
	}
	return "unknown_" + strconv.FormatInt(int64(a), 10)
}

// Words are the action for a person: "node reboot".
func (a Action) Words() string {
	if n, ok := names[a]; ok {
		return n.words
	}
	return "action " + strconv.FormatInt(int64(a), 10) + " (unknown to this build)"
}

// Parse is the action a name stands for; ok false for a name that is none of All's.
func Parse(name string) (Action, bool) {
	for _, a := range All {
		if names[a].name == name {
			return a, true
		}
	}
	return 0, false
}

// Names are All's names, for errors and documentation.
func Names() []string {
	out := make([]string, len(All))
	for i, a := range All {
		out[i] = names[a].name
	}
	return out
}
