// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// severityLevels maps an XID severity to the gpu_health value it sets: info XIDs are logged
// and counted but leave the GPU healthy.
var severityLevels = map[string]int64{
	metadata.AttributeXidSeverityInfo.String():    healthOK,
	metadata.AttributeXidSeverityWarning.String(): healthWarning,
	metadata.AttributeXidSeverityFatal.String():   healthFatal,
}

// Recommended actions, worded after NVIDIA's XID catalog "immediate resolution" column.
const (
	actionNone       = "none; counted for trend alerts"
	actionRestartApp = "restart the application; if it repeats with other applications, run GPU diagnostics"
	actionResetGPU   = "drain the GPU's jobs and reset the GPU (or reboot the node)"
	actionReboot     = "drain the node, reboot it, and inspect the hardware if the XID comes back"
	actionNVLink     = "drain the node, check the NVLink/NVSwitch fabric (fabric manager, cabling), then reset"
	actionUnknown    = "look the code up in NVIDIA's XID catalog"
)

// defaultXIDTable is the XID table shipped with the receiver. Where the reference tools disagree
// (docs: shared/reference/gpu-monitoring-anchors.md §3.1) the choice and the reason are noted;
// every entry can be overridden with xid::table.
var defaultXIDTable = map[uint64]xidInfo{
	8: {"GPU stopped processing (channel timeout)", "warning", actionRestartApp},
	// 13: GKE's device plugin marks the GPU unhealthy, NVIDIA's catalog, gpud and the k8s device
	// plugin treat it as an application fault (out-of-range access, illegal instruction). An
	// application fault is the common cause, so warning; raise it per cluster if needed.
	13: {"Graphics engine exception", "warning", actionRestartApp},
	31: {"GPU memory page fault", "warning", actionRestartApp},
	32: {"Invalid or corrupted push buffer stream", "warning", actionRestartApp},
	38: {"Driver firmware error", "warning", actionResetGPU},
	// 43: the catalog says IGNORE, EKS users ask to promote it (aws/eks-node-monitoring-agent#272):
	// the channel was torn down, the GPU still works, so warning with no reset.
	43: {"GPU stopped processing (channel reset)", "warning", actionRestartApp},
	45: {"Preemptive cleanup, due to previous errors", "info", actionNone},
	48: {"Double-bit ECC error", "fatal", actionResetGPU},
	61: {"Internal micro-controller breakpoint/warning", "warning", actionResetGPU},
	62: {"Internal micro-controller halt", "fatal", actionResetGPU},
	63: {"ECC page retirement or row remapping recording event", "warning", actionResetGPU},
	64: {"ECC page retirement or row remapper recording failure", "fatal", actionReboot},
	// 68: only GKE and gpud call it fatal; an NVDEC exception is usually a bad stream handed to
	// the video decoder, so warning.
	68: {"NVDEC0 exception", "warning", actionRestartApp},
	69: {"Graphics engine class error", "warning", actionRestartApp},
	74: {"NVLink error", "fatal", actionNVLink},
	79: {"GPU has fallen off the bus", "fatal", actionReboot},
	// 92: the device plugins mark the GPU unhealthy, NVIDIA says ignore: the errors were
	// corrected. Warning, so a rising single-bit rate is seen before it turns into XID 48/63.
	92: {"High single-bit ECC error rate", "warning", actionNone},
	94: {"Contained ECC error", "warning", actionRestartApp},
	95: {"Uncontained ECC error", "fatal", actionResetGPU},
	// 109: the catalog says RESET_GPU, gpud says warning; a context-switch timeout is often one
	// hung application, so warning, with the catalog's reset as the action.
	109: {"Context switch timeout error", "warning", actionResetGPU},
	119: {"GSP RPC timeout", "fatal", actionResetGPU},
	120: {"GSP error", "fatal", actionResetGPU},
	140: {"Unrecovered ECC error", "fatal", actionResetGPU},
	143: {"GPU initialization failure", "fatal", actionReboot},
	// 144-150: NVLink5 (Blackwell) link errors; most are "Nonfatal" subcodes recovered in hardware.
	144: {"NVLink: SAW error", "warning", actionNVLink},
	145: {"NVLink: RLW error", "warning", actionNVLink},
	146: {"NVLink: TLW error", "warning", actionNVLink},
	147: {"NVLink: TREX error", "warning", actionNVLink},
	148: {"NVLink: NVLPW error", "warning", actionNVLink},
	149: {"NVLink: NETIR error", "warning", actionNVLink},
	150: {"NVLink: MSE error", "warning", actionNVLink},
}

type xidInfo struct {
	meaning, severity, action string
}

type xidTable map[uint64]xidInfo

// newXIDTable is the default table with the config's overrides, field by field; Validate has
// checked the keys and severities.
func newXIDTable(overrides map[string]XIDInfo) xidTable {
	t := make(xidTable, len(defaultXIDTable)+len(overrides))
	for code, info := range defaultXIDTable {
		t[code] = info
	}
	for key, o := range overrides {
		code, _ := strconv.ParseUint(key, 10, 32)
		info, ok := t[code]
		if !ok {
			info = unknownXID
		}
		if o.Meaning != "" {
			info.meaning = o.Meaning
		}
		if o.Severity != "" {
			info.severity = o.Severity
		}
		if o.Action != "" {
			info.action = o.Action
		}
		t[code] = info
	}
	return t
}

var unknownXID = xidInfo{"XID not in the receiver's table", "warning", actionUnknown}

func (t xidTable) lookup(code uint64) xidInfo {
	if info, ok := t[code]; ok {
		return info
	}
	return unknownXID
}

// LookupXID is the shipped table's entry for an XID code (the fallback entry for a code it does
// not list), for tools that read gpu_xid_errors_total without the collector's configuration.
func LookupXID(code uint64) XIDInfo {
	info := xidTable(defaultXIDTable).lookup(code)
	return XIDInfo{Meaning: info.meaning, Severity: info.severity, Action: info.action}
}
