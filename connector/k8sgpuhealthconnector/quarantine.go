// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// The quarantine's marks on a node: the taint a drainer selects by (its value the recommended
// action), and the annotations that say who quarantined the node, when and why, and when it was
// returned to service. They are the quarantine's whole state: a writer that starts reads them.
const (
	TaintKey             = "otelcol-gpu.io/gpu-unhealthy"
	AnnotationQuarantine = "otelcol-gpu.io/quarantine"
	AnnotationReleased   = "otelcol-gpu.io/quarantine-released"
)

// Reasons of the quarantine's Events.
const (
	reasonQuarantined   = "GPUQuarantined"
	reasonDryRun        = "GPUQuarantineDryRun"
	reasonRefused       = "GPUQuarantineRefused"
	reasonFailed        = "GPUQuarantineFailed"
	reasonTripped       = "GPUQuarantineBreakerTripped"
	reasonSkipped       = "GPUQuarantineSkipped"
	reasonReleased      = "GPUQuarantineReleased"
	reasonReturned      = "GPUQuarantineReturned"
	byPerson            = "a person (uncordoned the node)"
	eventQuarantine     = "gpu.node.quarantine"
	eventBreaker        = "gpu.quarantine.breaker"
	quarantineEventKeys = "quarantine/"
)

// quarantineRecord is AnnotationQuarantine's value: who cordoned the node, when, and why.
type quarantineRecord struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Reason and Faults are the node's GPUHealthy reason and message then.
	Reason string `json:"reason"`
	Faults string `json:"faults"`
	// Class is the faults' own action; Action the recommended one, escalated or not.
	Class    Action       `json:"class"`
	Action   Action       `json:"action"`
	Severity xid.Severity `json:"severity"`
	Tainted  bool         `json:"tainted"`
}

// releaseRecord is AnnotationReleased's value: when and by whom the node was returned to
// service, and the quarantine it ended, for the breaker's window and escalation.
type releaseRecord struct {
	By            string    `json:"by"`
	At            time.Time `json:"at"`
	QuarantinedAt time.Time `json:"quarantined_at"`
	Class         Action    `json:"class"`
	Action        Action    `json:"action"`
}

// quarantineState is what the quarantine knows of a node: from its annotations, or, in dry
// run, from what the dry run recorded.
type quarantineState struct {
	cordoned bool
	ours     *quarantineRecord
	released *releaseRecord
}

// quarantine is the writer's quarantine: its policy and what it keeps in memory. Only the
// writer's loop uses it.
type quarantine struct {
	cfg *QuarantineConfig
	// dryRun are the dry run's records, by node: in memory only, the dry run writes nothing.
	dryRun map[string]*quarantineState
	// breakerOpen: a quarantine was refused and the count is still at the limit.
	breakerOpen bool
	// recent and gpuNodes are the breaker's counts, made once per pass (recent counted on as the
	// pass quarantines).
	recent, gpuNodes int
	counted          bool
	// reported keeps refusals and skips reported once per node, with the newest fault then.
	refused, skipped map[string]time.Time
	counts           map[quarantineCount]int64
}

type quarantineCount struct {
	action  metadata.AttributeQuarantineAction
	outcome metadata.AttributeOutcome
}

func newQuarantine(cfg *QuarantineConfig) *quarantine {
	q := &quarantine{cfg: cfg, dryRun: map[string]*quarantineState{}, refused: map[string]time.Time{}, skipped: map[string]time.Time{}, counts: map[quarantineCount]int64{}}
	// Every count from 0, so that increase() sees the first action.
	for _, a := range metadata.MapAttributeQuarantineAction {
		for _, o := range metadata.MapAttributeOutcome {
			q.counts[quarantineCount{a, o}] = 0
		}
	}
	return q
}

// next is the action after a, for a fault of a's class that came back after a was done.
func (a Action) next() Action {
	if a == ActionResetGPU {
		return ActionReboot
	}
	return ActionInspectHardware
}

// escalate raises v's recommended action and severity when a fault of its class came back
// within window of the node's return to service after a quarantine for that class.
func escalate(v verdict, released *releaseRecord, now time.Time, window time.Duration) verdict {
	if v.healthy || released == nil || window == 0 || released.Class != v.class || now.Sub(released.At) > window {
		return v
	}
	v.action, v.severity = released.Action.next(), xid.SeverityFatal
	return v
}

// state is node's quarantine state: its annotations, or the dry run's records.
func (q *quarantine) state(node *corev1.Node) quarantineState {
	if q.cfg.DryRun {
		s := q.dryRun[node.Name]
		if s == nil {
			// A dry run's view of a node cordoned for real is the node's: someone else's cordon.
			return quarantineState{cordoned: node.Spec.Unschedulable}
		}
		return quarantineState{cordoned: node.Spec.Unschedulable || s.ours != nil, ours: s.ours, released: s.released}
	}
	s := quarantineState{cordoned: node.Spec.Unschedulable}
	if v, ok := node.Annotations[AnnotationQuarantine]; ok {
		// Present, even unreadable, it is ours: never cordon a node twice.
		s.ours = &quarantineRecord{}
		_ = json.Unmarshal([]byte(v), s.ours)
	}
	if v, ok := node.Annotations[AnnotationReleased]; ok {
		s.released = &releaseRecord{}
		if json.Unmarshal([]byte(v), s.released) != nil {
			s.released = nil
		}
	}
	return s
}

// hasGPUs tells a GPU node by its capacity.
func (q *quarantine) hasGPUs(node *corev1.Node) bool {
	for _, name := range q.cfg.GPUResourceNames {
		if c, ok := node.Status.Capacity[corev1.ResourceName(name)]; ok && !c.IsZero() {
			return true
		}
	}
	return false
}

// allows is the breaker: whether one more node may be quarantined.
func (q *quarantine) allows() bool {
	b := q.cfg.Breaker
	return float64(q.recent) < b.MaxShare*float64(q.gpuNodes) && (b.MaxNodes == 0 || q.recent < b.MaxNodes)
}

// countQuarantines makes the breaker's counts from the nodes in the cache: the GPU nodes, and
// those quarantined (dry runs included) within the window, returned to service since or not.
// An open breaker closes once they allow a quarantine again.
func (w *writer) countQuarantines(now time.Time) {
	q := w.quarantine
	q.recent, q.gpuNodes, q.counted = 0, 0, true
	for _, obj := range w.nodes.GetStore().List() {
		node := obj.(*corev1.Node)
		if q.hasGPUs(node) || (w.devices != nil && len(w.devices.gpus[node.Name]) > 0) {
			q.gpuNodes++
		}
		s := q.state(node)
		window := q.cfg.Breaker.Window
		if (s.ours != nil && now.Sub(s.ours.At) <= window) || (s.released != nil && now.Sub(s.released.QuarantinedAt) <= window) ||
			(w.devices != nil && w.devices.recentlyHeld(node.Name, now, window)) {
			q.recent++
		}
	}
	if q.breakerOpen && q.allows() {
		q.breakerOpen = false
		clear(q.refused)
		w.breakerChanged(nil, now)
	}
}

// adopt takes a node whose condition a writer before this one wrote False as reported: its
// refusal or skip, reported then, is not reported again.
func (q *quarantine) adopt(node string, v verdict, now time.Time) {
	q.skipped[node] = v.latest
	q.refused[node] = now
}

// quarantineNode applies the policy to one node after its condition was written: quarantine a
// node whose recommended action cordons, return one this component quarantined to service
// once it has been healthy for uncordon_after, and never touch one someone else cordoned.
func (w *writer) quarantineNode(ctx context.Context, node *corev1.Node, v verdict, gpus []faultyGPU, healthySince, now time.Time) {
	q := w.quarantine
	if !q.counted {
		if w.devices != nil {
			w.loadDeviceRules(ctx)
		}
		w.countQuarantines(now)
	}
	s := q.state(node)
	if w.devices != nil {
		if v.healthy {
			w.releaseDevices(ctx, node, healthySince, now)
		} else if s.ours == nil && w.quarantineDevices(ctx, node, s, v, gpus, now) {
			return
		}
	}
	switch {
	case s.ours != nil && !s.cordoned:
		// A person uncordoned it: it stays in service until a fault begins after that.
		w.release(ctx, node, s, now, byPerson)
	case s.ours != nil && v.healthy:
		if q.cfg.UncordonAfter > 0 && !healthySince.IsZero() && now.Sub(healthySince) >= q.cfg.UncordonAfter {
			w.release(ctx, node, s, now, w.by())
		}
	case s.ours != nil:
		// Still faulty: the taint follows the recommended action, which may have grown.
		if tainted := slices.Contains(q.cfg.Taint, v.action); tainted && (!s.ours.Tainted || s.ours.Action != v.action) {
			w.cordon(ctx, node, v, now)
		}
	case v.healthy || !slices.Contains(q.cfg.Cordon, v.action):
		delete(q.refused, node.Name)
	case s.cordoned:
		if v.latest.After(q.skipped[node.Name]) {
			q.skipped[node.Name] = v.latest
			w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomePersonCordoned, v, reasonSkipped,
				fmt.Sprintf("not cordoned for %s (%s): someone else cordoned the node, and the quarantine leaves it as it is", v.reason, v.action))
		}
	case s.released != nil && s.released.By == byPerson && !v.latest.After(s.released.At):
		// Returned to service by a person after these faults began: their call.
	case !q.allows():
		// A refusal reported before (this pass's or, adopted, a writer's before this one) is not
		// reported again; the breaker is open all the same.
		_, reported := q.refused[node.Name]
		if !q.breakerOpen {
			q.breakerOpen = true
			if !reported {
				w.breakerChanged(node, now)
			}
		}
		if reported {
			return
		}
		q.refused[node.Name] = now
		w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeBreakerOpen, v, reasonRefused,
			fmt.Sprintf("not cordoned for %s (%s): the circuit breaker is open, %d of %d GPU nodes quarantined within %s", v.reason, v.action, q.recent, q.gpuNodes, q.cfg.Breaker.Window))
	default:
		if w.cordon(ctx, node, v, now) {
			q.recent++
		}
	}
}

// cordon quarantines node: cordon, the taint when the policy says so, and the annotation; in
// dry run only the record of it. It reports whether it did (or would have).
func (w *writer) cordon(ctx context.Context, node *corev1.Node, v verdict, now time.Time) bool {
	q := w.quarantine
	tainted := slices.Contains(q.cfg.Taint, v.action)
	rec := &quarantineRecord{By: w.by(), At: now, Reason: v.reason, Faults: v.faults, Class: v.class, Action: v.action, Severity: v.severity, Tainted: tainted}
	what := "cordoned"
	if tainted {
		what = fmt.Sprintf("cordoned and tainted %s=%s:NoSchedule", TaintKey, v.action)
	}
	if old := q.state(node).ours; old != nil {
		rec.At = old.At // the quarantine goes on: its start stays
	}
	why := fmt.Sprintf("for %s: %s (%s)", v.reason, v.action, v.severity)
	if q.cfg.DryRun {
		s := q.dryRun[node.Name]
		if s == nil {
			s = &quarantineState{}
			q.dryRun[node.Name] = s
		}
		s.ours = rec
		w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeDryRun, v, reasonDryRun,
			fmt.Sprintf("dry run: would have %s %s; nothing was changed", what, why))
		return true
	}
	record, _ := json.Marshal(rec)
	patch := nodePatch{
		Metadata: nodeMeta{ResourceVersion: node.ResourceVersion, Annotations: map[string]*string{AnnotationQuarantine: new(string(record))}},
		Spec:     nodeSpec{Unschedulable: new(true), Taints: withTaint(node.Spec.Taints, tainted, v.action)},
	}
	if _, err := w.patchNode(ctx, node, patch); err != nil {
		w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeFailed, v, reasonFailed,
			fmt.Sprintf("could not be %s %s: %v; retried on the next pass", what, why, err))
		return false
	}
	w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeApplied, v, reasonQuarantined,
		fmt.Sprintf("%s %s. Faults: %s", what, why, v.faults))
	return true
}

// release returns a node this component quarantined to service: uncordoned (unless a person
// did), its taint and annotation removed, and the release recorded for the breaker and for
// escalation.
func (w *writer) release(ctx context.Context, node *corev1.Node, s quarantineState, now time.Time, by string) {
	q := w.quarantine
	rel := &releaseRecord{By: by, At: now, QuarantinedAt: s.ours.At, Class: s.ours.Class, Action: s.ours.Action}
	outcome, reason, text := metadata.AttributeOutcomeApplied, reasonReleased,
		fmt.Sprintf("uncordoned: GPUHealthy has been True for %s since the quarantine for %s (%s)", q.cfg.UncordonAfter, s.ours.Reason, s.ours.Action)
	if by == byPerson {
		outcome, reason, text = metadata.AttributeOutcomePersonUncordoned, reasonReturned,
			fmt.Sprintf("a person uncordoned the node this component quarantined for %s (%s): it stays in service until a new fault; the taint and the annotation are removed", s.ours.Reason, s.ours.Action)
	}
	v := verdict{reason: s.ours.Reason, class: s.ours.Class, action: s.ours.Action, severity: s.ours.Severity}
	if q.cfg.DryRun {
		q.dryRun[node.Name] = &quarantineState{released: rel}
		w.quarantineAction(node, metadata.AttributeQuarantineActionUncordon, metadata.AttributeOutcomeDryRun, v, reasonDryRun, "dry run: would have "+text)
		return
	}
	record, _ := json.Marshal(rel)
	patch := nodePatch{
		Metadata: nodeMeta{ResourceVersion: node.ResourceVersion, Annotations: map[string]*string{AnnotationQuarantine: nil, AnnotationReleased: new(string(record))}},
		Spec:     nodeSpec{Taints: withTaint(node.Spec.Taints, false, "")},
	}
	if by != byPerson {
		patch.Spec.Unschedulable = new(false)
		if g := w.gate; g != nil && !g.cfg.DryRun {
			// Back in service through the validation gate, as a node that joins.
			gated, _ := json.Marshal(validationRecord{By: w.by(), Since: now})
			patch.Metadata.Annotations[AnnotationValidation] = new(string(gated))
			patch.Spec.Taints = g.withTaint(patch.Spec.Taints)
			text += fmt.Sprintf("; tainted %s:%s until the validation gate passes it", g.cfg.TaintKey, g.cfg.TaintEffect)
		}
	}
	if _, err := w.patchNode(ctx, node, patch); err != nil {
		w.quarantineAction(node, metadata.AttributeQuarantineActionUncordon, metadata.AttributeOutcomeFailed, v, reasonFailed,
			fmt.Sprintf("could not be released: %v; retried on the next pass", err))
		return
	}
	w.quarantineAction(node, metadata.AttributeQuarantineActionUncordon, outcome, v, reason, text)
}

// nodePatch is a JSON merge patch of a node: the annotations and spec fields it sets (a nil
// annotation is removed), on the resourceVersion it was made from, so that a change made
// meanwhile (someone's taint) is never overwritten: the patch fails and the next pass retries.
type nodePatch struct {
	Metadata nodeMeta `json:"metadata"`
	Spec     nodeSpec `json:"spec"`
}

type nodeMeta struct {
	ResourceVersion string             `json:"resourceVersion"`
	Annotations     map[string]*string `json:"annotations"`
}

type nodeSpec struct {
	Unschedulable *bool          `json:"unschedulable,omitempty"`
	Taints        []corev1.Taint `json:"taints"`
}

// withTaint is taints without the quarantine's, and with it when tainted.
func withTaint(taints []corev1.Taint, tainted bool, action Action) []corev1.Taint {
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == TaintKey })
	if tainted {
		out = append(out, corev1.Taint{Key: TaintKey, Value: string(action), Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

func (w *writer) patchNode(ctx context.Context, node *corev1.Node, p nodePatch) (*corev1.Node, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	updated, err := w.kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		w.errors[metadata.AttributeOperationNode]++
		w.markDirty([]string{node.Name})
		return nil, err
	}
	_, _ = stripNode(updated)
	w.nodeCache.Mutation(updated)
	return updated, nil
}

// by names this collector in the quarantine's records.
func (w *writer) by() string { return "otelcol-gpu k8s_gpu_health (" + w.identity + ")" }

// quarantineAction reports an action, or its refusal, every way: a log line, a log record, an
// Event on the node and a count.
func (w *writer) quarantineAction(node *corev1.Node, action metadata.AttributeQuarantineAction, outcome metadata.AttributeOutcome, v verdict, reason, text string) {
	w.quarantine.counts[quarantineCount{action, outcome}]++
	now := w.clock.Now()
	severity, eventType := plog.SeverityNumberInfo, corev1.EventTypeNormal
	if outcome == metadata.AttributeOutcomeApplied && (action == metadata.AttributeQuarantineActionCordon || action == metadata.AttributeQuarantineActionTaintDevice) ||
		outcome == metadata.AttributeOutcomeBreakerOpen || outcome == metadata.AttributeOutcomeFailed {
		severity, eventType = plog.SeverityNumberWarn, corev1.EventTypeWarning
	}
	fields := []zap.Field{zap.String("node", node.Name), zap.String("action", action.String()), zap.String("outcome", outcome.String()), zap.String("recommended", string(v.action))}
	if severity == plog.SeverityNumberWarn {
		w.logger.Warn("GPU quarantine: "+text, fields...)
	} else {
		w.logger.Info("GPU quarantine: "+text, fields...)
	}
	w.recorder.add(node, quarantineEventKeys+reason, eventType, reason, text, 1, now, now)
	if !w.cfg.Events.GpuNodeQuarantine.Enabled {
		return
	}
	w.emitRecord(eventQuarantine, severity, text, now, func(attrs pcommon.Map) {
		attrs.PutStr(gpunames.KeyNodeName, node.Name)
		attrs.PutStr("quarantine_action", action.String())
		attrs.PutStr("outcome", outcome.String())
		attrs.PutStr("action", string(v.action))
		attrs.PutStr("severity", string(v.severity))
	})
}

// breakerChanged reports the breaker opening (on node, the first it refused) or closing.
func (w *writer) breakerChanged(node *corev1.Node, now time.Time) {
	q := w.quarantine
	state, severity := metadata.AttributeBreakerStateClosed, plog.SeverityNumberInfo
	text := fmt.Sprintf("the quarantine's circuit breaker is closed: %d of %d GPU nodes quarantined within %s, new quarantines allowed again", q.recent, q.gpuNodes, q.cfg.Breaker.Window)
	if q.breakerOpen {
		state, severity = metadata.AttributeBreakerStateOpen, plog.SeverityNumberError
		text = fmt.Sprintf("the quarantine's circuit breaker tripped: %d of %d GPU nodes quarantined within %s (at most %g of them, or %d), no new quarantine until fewer are; %s was refused first. So many faulty nodes at once may be a fault of the monitoring (a driver update, an XID table) rather than of the GPUs: look before acting",
			q.recent, q.gpuNodes, q.cfg.Breaker.Window, q.cfg.Breaker.MaxShare, q.cfg.Breaker.MaxNodes, node.Name)
		w.logger.Error(text)
		w.recorder.add(node, quarantineEventKeys+reasonTripped, corev1.EventTypeWarning, reasonTripped, text, 1, now, now)
	} else {
		w.logger.Info(text)
	}
	if !w.cfg.Events.GpuQuarantineBreaker.Enabled {
		return
	}
	w.emitRecord(eventBreaker, severity, text, now, func(attrs pcommon.Map) {
		attrs.PutStr("breaker_state", state.String())
		attrs.PutInt("recent_nodes", int64(q.recent))
		attrs.PutInt("gpu_nodes", int64(q.gpuNodes))
	})
}

// emitRecord sends one log record down the logs pipelines. mdatagen makes no logs builder for
// a connector: the event names and attributes are metadata.yaml's (TestRecordsAreMetadatas).
func (w *writer) emitRecord(event string, severity plog.SeverityNumber, body string, at time.Time, attrs func(pcommon.Map)) {
	if w.logsOut == nil {
		return
	}
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	ld.ResourceLogs().At(0).ScopeLogs().At(0).Scope().SetName(metadata.ScopeName)
	ts := pcommon.NewTimestampFromTime(at)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetEventName(event)
	lr.SetSeverityNumber(severity)
	lr.SetSeverityText(severity.String())
	lr.Body().SetStr(body)
	attrs(lr.Attributes())
	if err := w.logsOut.ConsumeLogs(context.Background(), ld); err != nil {
		w.logger.Debug("the logs pipeline refused the quarantine's record", zap.Error(err))
	}
}

// endQuarantinePass closes the breaker if a pass that quarantined nothing finds it may, and
// forgets the pass's counts and the device rules it listed.
func (w *writer) endQuarantinePass(ctx context.Context, now time.Time) {
	if !w.quarantine.counted {
		if w.devices != nil {
			w.loadDeviceRules(ctx)
		}
		w.countQuarantines(now)
	}
	w.quarantine.counted = false
	if w.devices != nil {
		w.devices.listed = false
	}
}

// recordQuarantine records the quarantine's metrics: the nodes and the GPUs it holds (or would,
// in dry run), the breaker, its counts.
func (w *writer) recordQuarantine(ts pcommon.Timestamp) {
	q := w.quarantine
	for _, obj := range w.nodes.GetStore().List() {
		node := obj.(*corev1.Node)
		if s := q.state(node); s.ours != nil {
			w.mb.RecordGpuNodeQuarantinedDataPoint(ts, 1, node.Name, metadata.MapAttributeAction[string(s.ours.Action)], q.cfg.DryRun)
		}
	}
	if w.devices != nil {
		for node, held := range w.devices.held {
			for i := range held {
				r := &held[i].record
				w.mb.RecordGpuDeviceQuarantinedDataPoint(ts, 1, node, r.GPU, r.Device, metadata.MapAttributeAction[string(r.Action)], w.devices.dryRun)
			}
		}
	}
	open := int64(0)
	if q.breakerOpen {
		open = 1
	}
	w.mb.RecordGpuQuarantineBreakerOpenDataPoint(ts, open)
	w.mb.RecordGpuQuarantineRecentNodesDataPoint(ts, int64(q.recent))
	for c, n := range q.counts {
		w.mb.RecordGpuQuarantineActionsTotalDataPoint(ts, n, c.action, c.outcome)
	}
}
