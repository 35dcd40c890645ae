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

// resolutionActions words each resolution class (NVIDIA's XID catalog "resolution bucket") as
// what an operator does; xid::table::<code>::action can replace the wording for one code.
var resolutionActions = map[metadata.AttributeXidResolution]string{
	metadata.AttributeXidResolutionNone:        "none; counted for trend alerts",
	metadata.AttributeXidResolutionRestartApp:  "restart the application; if it repeats with other applications, run GPU diagnostics",
	metadata.AttributeXidResolutionResetGpu:    "drain the GPU's jobs and reset the GPU (or reboot the node)",
	metadata.AttributeXidResolutionReboot:      "drain the node, reboot it, and inspect the hardware if the XID comes back",
	metadata.AttributeXidResolutionCheckNvlink: "drain the node, check the NVLink/NVSwitch fabric (fabric manager, cabling), then reset",
	metadata.AttributeXidResolutionUnknown:     "look the code up in NVIDIA's XID catalog",
}

const (
	resolveNone       = metadata.AttributeXidResolutionNone
	resolveRestartApp = metadata.AttributeXidResolutionRestartApp
	resolveResetGPU   = metadata.AttributeXidResolutionResetGpu
	resolveReboot     = metadata.AttributeXidResolutionReboot
	resolveNVLink     = metadata.AttributeXidResolutionCheckNvlink
)

// defaultXIDTable is the XID table shipped with the receiver, after the resolution buckets of
// NVIDIA's XID catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
// Where the catalog and the tools that act on XIDs (leptonai/gpud, NVIDIA/k8s-device-plugin,
// GKE's device plugin, aws/eks-node-monitoring-agent) disagree, the choice and the reason are noted;
// every entry can be overridden with xid::table. The resolution class is on the log records and
// on gpu_xid_errors_total, so alert rules select by class and never copy this table.
var defaultXIDTable = map[uint64]xidInfo{
	8: {meaning: "GPU stopped processing (channel timeout)", severity: "warning", resolution: resolveRestartApp},
	// 13: GKE's device plugin marks the GPU unhealthy, NVIDIA's catalog, gpud and the k8s device
	// plugin treat it as an application fault (out-of-range access, illegal instruction). An
	// application fault is the common cause, so warning; raise it per cluster if needed.
	13: {meaning: "Graphics engine exception", severity: "warning", resolution: resolveRestartApp},
	31: {meaning: "GPU memory page fault", severity: "warning", resolution: resolveRestartApp},
	32: {meaning: "Invalid or corrupted push buffer stream", severity: "warning", resolution: resolveRestartApp},
	38: {meaning: "Driver firmware error", severity: "warning", resolution: resolveResetGPU},
	// 43: the catalog says IGNORE, EKS users ask to promote it (aws/eks-node-monitoring-agent#272):
	// the channel was torn down, the GPU still works, so warning with no reset.
	43: {meaning: "GPU stopped processing (channel reset)", severity: "warning", resolution: resolveRestartApp},
	45: {meaning: "Preemptive cleanup, due to previous errors", severity: "info", resolution: resolveNone},
	48: {meaning: "Double-bit ECC error", severity: "fatal", resolution: resolveResetGPU},
	61: {meaning: "Internal micro-controller breakpoint/warning", severity: "warning", resolution: resolveResetGPU},
	62: {meaning: "Internal micro-controller halt", severity: "fatal", resolution: resolveResetGPU},
	63: {meaning: "ECC page retirement or row remapping recording event", severity: "warning", resolution: resolveResetGPU},
	64: {meaning: "ECC page retirement or row remapper recording failure", severity: "fatal", resolution: resolveReboot},
	// 68: only GKE and gpud call it fatal; an NVDEC exception is usually a bad stream handed to
	// the video decoder, so warning.
	68: {meaning: "NVDEC0 exception", severity: "warning", resolution: resolveRestartApp},
	69: {meaning: "Graphics engine class error", severity: "warning", resolution: resolveRestartApp},
	74: {meaning: "NVLink error", severity: "fatal", resolution: resolveNVLink},
	79: {meaning: "GPU has fallen off the bus", severity: "fatal", resolution: resolveReboot},
	// 92: the device plugins mark the GPU unhealthy, NVIDIA says ignore: the errors were
	// corrected. Warning, so a rising single-bit rate is seen before it turns into XID 48/63.
	92: {meaning: "High single-bit ECC error rate", severity: "warning", resolution: resolveNone},
	94: {meaning: "Contained ECC error", severity: "warning", resolution: resolveRestartApp},
	95: {meaning: "Uncontained ECC error", severity: "fatal", resolution: resolveResetGPU},
	// 109: the catalog says RESET_GPU, gpud says warning; a context-switch timeout is often one
	// hung application, so warning, with the catalog's reset as the resolution.
	109: {meaning: "Context switch timeout error", severity: "warning", resolution: resolveResetGPU},
	119: {meaning: "GSP RPC timeout", severity: "fatal", resolution: resolveResetGPU},
	120: {meaning: "GSP error", severity: "fatal", resolution: resolveResetGPU},
	140: {meaning: "Unrecovered ECC error", severity: "fatal", resolution: resolveResetGPU},
	143: {meaning: "GPU initialization failure", severity: "fatal", resolution: resolveReboot},
	// 144-150: NVLink5 (Blackwell) link errors; most are "Nonfatal" subcodes recovered in hardware.
	144: {meaning: "NVLink: SAW error", severity: "warning", resolution: resolveNVLink},
	145: {meaning: "NVLink: RLW error", severity: "warning", resolution: resolveNVLink},
	146: {meaning: "NVLink: TLW error", severity: "warning", resolution: resolveNVLink},
	147: {meaning: "NVLink: TREX error", severity: "warning", resolution: resolveNVLink},
	148: {meaning: "NVLink: NVLPW error", severity: "warning", resolution: resolveNVLink},
	149: {meaning: "NVLink: NETIR error", severity: "warning", resolution: resolveNVLink},
	150: {meaning: "NVLink: MSE error", severity: "warning", resolution: resolveNVLink},
}

type xidInfo struct {
	meaning, severity string
	resolution        metadata.AttributeXidResolution
	// action replaces the resolution's standard wording (resolutionActions) when set.
	action string
}

// actionText is what the log record recommends.
func (i xidInfo) actionText() string {
	if i.action != "" {
		return i.action
	}
	return resolutionActions[i.resolution]
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
		if o.Resolution != "" {
			info.resolution = metadata.MapAttributeXidResolution[o.Resolution]
		}
		if o.Action != "" {
			info.action = o.Action
		}
		t[code] = info
	}
	return t
}

var unknownXID = xidInfo{meaning: "XID not in the receiver's table", severity: "warning", resolution: metadata.AttributeXidResolutionUnknown}

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
	return XIDInfo{Meaning: info.meaning, Severity: info.severity, Resolution: info.resolution.String(), Action: info.actionText()}
}

// ResolutionAction is the standard wording of what to do for a resolution class (the resolution
// label of gpu_xid_errors_total); empty for a class the receiver does not know.
func ResolutionAction(resolution string) string {
	return resolutionActions[metadata.MapAttributeXidResolution[resolution]]
}
