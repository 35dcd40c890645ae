// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// CheckFault is a fault the judge finds in one collection of a node, for the node check
// (cmd/gpucheck).
type CheckFault struct {
	// Kind is the fault's kind (the fault label: xid, gpu_lost, driver_hang, ...), Reason the
	// condition's reason for it.
	Kind, Reason string
	// GPU is the GPU's UUID, or #<minor number> for a GPU lost before its UUID was read; empty
	// for the node's own faults (gpu_missing). Minor is its minor number.
	GPU, Minor string
	// XID is an XID fault's code.
	XID uint64
	// What says what the fault is, after its GPU.
	What string
	// Action is the recommended action, ActionWords what it takes.
	Action      Action
	ActionWords string
	Severity    xid.Severity
}

// JudgeCollection judges one collection of a node's gpu receiver (md, and its XID log records
// ld) as the writer judges the agents' data, every state taken as having lasted its `for`: a
// check looks once. xidResolutions are the XID classes that call for action; nil: the writer's
// default. The faults come in the order the node's condition lists them.
func JudgeCollection(md pmetric.Metrics, ld plog.Logs, xidResolutions []xid.Resolution) []CheckFault {
	cfg := createDefaultConfig().(*Config)
	if xidResolutions != nil {
		cfg.Faults.XIDResolutions = xidResolutions
	}
	for _, k := range faultKinds {
		if k.config != nil {
			k.config(&cfg.Faults).For = 0
		}
	}
	j := newJudge(cfg, clock.Real{})
	j.consumeMetrics(md)
	j.consumeLogs(ld)
	var out []CheckFault
	for _, n := range j.nodes {
		for _, f := range n.open() {
			out = append(out, CheckFault{
				Kind: f.kind.String(), Reason: kindOf(f.kind).reason,
				GPU: f.gpu, Minor: f.minor, XID: f.code, What: f.what,
				Action: f.action, ActionWords: f.action.words(), Severity: f.severity,
			})
		}
	}
	return out
}

// DriverAction is the action class of the driver's recovery action a, as the writer takes it for
// a GPU's faults; ok false for none and for a value this build does not know.
func DriverAction(a recoveryaction.Action) (action Action, ok bool) {
	action, ok = driverClasses[a]
	return action, ok
}
