// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package xid is NVIDIA's XID table as this project ships it: what each code means, how bad it
// is, and the resolution class that alert rules select by. The gpu receiver labels, counts and
// logs XIDs with it (its xid::table overrides entries); the GPU report explains the counts with
// it, without the receiver.
package xid // import "github.com/otelcol-gpu/otelcol-gpu/internal/xid"

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
)

// Severity is how bad an XID is: the level it sets on gpu_health{condition="xid"}.
type Severity string

// Severities, mildest first.
const (
	// SeverityInfo XIDs are counted and logged, and leave the GPU healthy.
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityFatal   Severity = "fatal"
)

// Severities are the values a Severity may take.
var Severities = []Severity{SeverityInfo, SeverityWarning, SeverityFatal}

// Validate accepts a severity of Severities, or none: an override that keeps the table's.
func (s Severity) Validate() error {
	if s == "" {
		return nil
	}
	return enum.Check(s, Severities)
}

// Resolution is what an XID calls for, after the "resolution bucket" of NVIDIA's XID catalog:
// the resolution label of gpu_xid_errors_total, which alert rules select by.
type Resolution string

// Resolutions.
const (
	// ResolutionNone: counted only.
	ResolutionNone Resolution = "none"
	// ResolutionRestartApp: the application is at fault.
	ResolutionRestartApp Resolution = "restart_app"
	// ResolutionResetGPU: drain the GPU's jobs and reset it.
	ResolutionResetGPU Resolution = "reset_gpu"
	// ResolutionReboot: drain and reboot the node.
	ResolutionReboot Resolution = "reboot"
	// ResolutionCheckNVLink: the NVLink/NVSwitch fabric.
	ResolutionCheckNVLink Resolution = "check_nvlink"
	// ResolutionUnknown is the class of a code the table does not list.
	ResolutionUnknown Resolution = "unknown"
)

// Resolutions are the values a Resolution may take.
var Resolutions = []Resolution{ResolutionNone, ResolutionRestartApp, ResolutionResetGPU, ResolutionReboot, ResolutionCheckNVLink, ResolutionUnknown}

// Validate accepts a resolution of Resolutions, or none: an override that keeps the table's.
func (r Resolution) Validate() error {
	if r == "" {
		return nil
	}
	return enum.Check(r, Resolutions)
}

// actions word each resolution class as what an operator does; an entry's Action can replace
// the wording for one code.
var actions = map[Resolution]string{
	ResolutionNone:        "none; counted for trend alerts",
	ResolutionRestartApp:  "restart the application; if it repeats with other applications, run GPU diagnostics",
	ResolutionResetGPU:    "drain the GPU's jobs and reset the GPU (or reboot the node)",
	ResolutionReboot:      "drain the node, reboot it, and inspect the hardware if the XID comes back",
	ResolutionCheckNVLink: "drain the node, check the NVLink/NVSwitch fabric (fabric manager, cabling), then reset",
	ResolutionUnknown:     "look the code up in NVIDIA's XID catalog",
}

// Action is the standard wording of what to do for r; empty for a class the table does not know
// (a site's own label value).
func (r Resolution) Action() string { return actions[r] }

// Info is one entry of the table; in xid::table, an override of one, whose empty fields keep the
// table's.
type Info struct {
	Meaning    string     `mapstructure:"meaning"`
	Severity   Severity   `mapstructure:"severity"`
	Resolution Resolution `mapstructure:"resolution"`
	// Action words the recommendation; empty keeps the resolution's wording.
	Action string `mapstructure:"action"`
}

// ActionText is what to do: the entry's own wording, else its resolution's.
func (i Info) ActionText() string {
	if i.Action != "" {
		return i.Action
	}
	return i.Resolution.Action()
}

// Table holds entries by XID code.
type Table map[uint64]Info

// shipped is the XID table as the project ships it, after the resolution buckets of
// NVIDIA's XID catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
// Where the catalog and the tools that act on XIDs (leptonai/gpud, NVIDIA/k8s-device-plugin,
// GKE's device plugin, aws/eks-node-monitoring-agent) disagree, the choice and the reason are noted;
// every entry can be overridden with xid::table. The resolution class is on the log records and
// on gpu_xid_errors_total, so alert rules select by class and never copy this table.
var shipped = Table{
	8: {Meaning: "GPU stopped processing (channel timeout)", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	// 13: GKE's device plugin marks the GPU unhealthy, NVIDIA's catalog, gpud and the k8s device
	// plugin treat it as an application fault (out-of-range access, illegal instruction). An
	// application fault is the common cause, so warning; raise it per cluster if needed.
	13: {Meaning: "Graphics engine exception", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	31: {Meaning: "GPU memory page fault", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	32: {Meaning: "Invalid or corrupted push buffer stream", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	38: {Meaning: "Driver firmware error", Severity: SeverityWarning, Resolution: ResolutionResetGPU},
	// 43: the catalog says IGNORE, EKS users ask to promote it (aws/eks-node-monitoring-agent#272):
	// the channel was torn down, the GPU still works, so warning with no reset.
	43: {Meaning: "GPU stopped processing (channel reset)", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	45: {Meaning: "Preemptive cleanup, due to previous errors", Severity: SeverityInfo, Resolution: ResolutionNone},
	48: {Meaning: "Double-bit ECC error", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	61: {Meaning: "Internal micro-controller breakpoint/warning", Severity: SeverityWarning, Resolution: ResolutionResetGPU},
	62: {Meaning: "Internal micro-controller halt", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	63: {Meaning: "ECC page retirement or row remapping recording event", Severity: SeverityWarning, Resolution: ResolutionResetGPU},
	64: {Meaning: "ECC page retirement or row remapper recording failure", Severity: SeverityFatal, Resolution: ResolutionReboot},
	// 68: only GKE and gpud call it fatal; an NVDEC exception is usually a bad stream handed to
	// the video decoder, so warning.
	68: {Meaning: "NVDEC0 exception", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	69: {Meaning: "Graphics engine class error", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	74: {Meaning: "NVLink error", Severity: SeverityFatal, Resolution: ResolutionCheckNVLink},
	79: {Meaning: "GPU has fallen off the bus", Severity: SeverityFatal, Resolution: ResolutionReboot},
	// 92: the device plugins mark the GPU unhealthy, NVIDIA says ignore: the errors were
	// corrected. Warning, so a rising single-bit rate is seen before it turns into XID 48/63.
	92: {Meaning: "High single-bit ECC error rate", Severity: SeverityWarning, Resolution: ResolutionNone},
	94: {Meaning: "Contained ECC error", Severity: SeverityWarning, Resolution: ResolutionRestartApp},
	95: {Meaning: "Uncontained ECC error", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	// 109: the catalog says RESET_GPU, gpud says warning; a context-switch timeout is often one
	// hung application, so warning, with the catalog's reset as the resolution.
	109: {Meaning: "Context switch timeout error", Severity: SeverityWarning, Resolution: ResolutionResetGPU},
	119: {Meaning: "GSP RPC timeout", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	120: {Meaning: "GSP error", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	140: {Meaning: "Unrecovered ECC error", Severity: SeverityFatal, Resolution: ResolutionResetGPU},
	143: {Meaning: "GPU initialization failure", Severity: SeverityFatal, Resolution: ResolutionReboot},
	// 144-150: NVLink5 (Blackwell) link errors; most are "Nonfatal" subcodes recovered in hardware.
	144: {Meaning: "NVLink: SAW error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	145: {Meaning: "NVLink: RLW error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	146: {Meaning: "NVLink: TLW error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	147: {Meaning: "NVLink: TREX error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	148: {Meaning: "NVLink: NVLPW error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	149: {Meaning: "NVLink: NETIR error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
	150: {Meaning: "NVLink: MSE error", Severity: SeverityWarning, Resolution: ResolutionCheckNVLink},
}

// unknown is the entry of a code the table does not list.
var unknown = Info{Meaning: "XID not in the receiver's table", Severity: SeverityWarning, Resolution: ResolutionUnknown}

// ParseCode reads a key of xid::table: an XID code, a positive integer.
func ParseCode(key string) (uint64, error) {
	if code, err := strconv.ParseUint(key, 10, 32); err == nil && code != 0 {
		return code, nil
	}
	return 0, fmt.Errorf("key %q is not an XID code (a positive integer)", key)
}

// New is the shipped table with overrides, keyed as in xid::table, applied field by field; keys
// that ParseCode refuses are left out (the configuration's check reports them).
func New(overrides map[string]Info) Table {
	t := make(Table, len(shipped)+len(overrides))
	maps.Copy(t, shipped)
	for key, o := range overrides {
		code, err := ParseCode(key)
		if err != nil {
			continue
		}
		info, ok := t[code]
		if !ok {
			info = unknown
		}
		if o.Meaning != "" {
			info.Meaning = o.Meaning
		}
		if o.Severity != "" {
			info.Severity = o.Severity
		}
		if o.Resolution != "" {
			info.Resolution = o.Resolution
		}
		if o.Action != "" {
			info.Action = o.Action
		}
		t[code] = info
	}
	return t
}

// Lookup is code's entry, or the entry of an unknown code.
func (t Table) Lookup(code uint64) Info {
	if info, ok := t[code]; ok {
		return info
	}
	return unknown
}

// Lookup is the shipped table's entry for code, for tools that read gpu_xid_errors_total
// without the collector's configuration.
func Lookup(code uint64) Info { return shipped.Lookup(code) }
