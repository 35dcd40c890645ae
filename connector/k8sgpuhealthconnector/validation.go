// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// The validation gate's marks on a node: the taint it removes once the node has passed (its key
// and effect are the configuration's; this is the default key), and the annotation that says
// since when the gate has held the node and whether its time ran out. The annotation is the
// gate's whole state: a writer that starts reads it.
const (
	ValidationTaintKey   = "otelcol-gpu.io/validation-pending"
	AnnotationValidation = "otelcol-gpu.io/validation"
)

// Reasons of the gate's Events.
const (
	reasonValidationPending  = "GPUValidationPending"
	reasonValidationPassed   = "GPUValidationPassed"
	reasonValidationTimedOut = "GPUValidationTimedOut"
	reasonValidationDryRun   = "GPUValidationDryRun"
	reasonValidationFailed   = "GPUValidationFailed"
	validationEventKeys      = "validation/"
)

// validationRecord is AnnotationValidation's value.
type validationRecord struct {
	By    string    `json:"by"`
	Since time.Time `json:"since"`
	// TimedOut is when the gate gave the node up to a person; the taint stays.
	TimedOut time.Time `json:"timed_out,omitzero"`
	// passed is the dry run's own: it would have removed the taint.
	passed bool
}

// checkedGPU is a GPU's newest health as the gate reads it.
type checkedGPU struct {
	minor string
	seen  time.Time
	// failing are the conditions whose newest sample is not ok, with their level.
	failing map[string]int64
}

// passRun is what the judge keeps of a node for the validation gate: its GPUs' newest health and its
// newest collections that passed in a row. A collection is one sample of the node's GPU count
// (every collection of the gpu receiver has one); it passes when the count is the configured
// one, every GPU counted reported every condition ok, and no fault is open. Beside them, the
// newest run of otelcol-gpu-check the agent reported.
type passRun struct {
	gpus map[string]*checkedGPU
	// check is the newest run of otelcol-gpu-check: its exit code, and when it ended (zero: none
	// reported).
	checkStatus int64
	checkEnded  time.Time
	// passes are the data times of the newest passing collections in a row, newest last, at
	// most validation::passes of them.
	passes []time.Time
	// collected is the newest collection's data time; failure says why the newest failing
	// collection or sample failed.
	collected time.Time
	failure   string
}

func (v *passRun) fail(why string) {
	v.passes, v.failure = v.passes[:0], why
}

// sample takes one gpu_health sample of gpu at data time t, already known to be fresh and in
// order: a condition not ok fails the run of passes at once.
func (v *passRun) sample(gpu, minor, condition string, level int64, t time.Time) {
	if v.gpus == nil {
		v.gpus = map[string]*checkedGPU{}
	}
	g := v.gpus[gpu]
	if g == nil {
		g = &checkedGPU{failing: map[string]int64{}}
		v.gpus[gpu] = g
	}
	g.minor, g.seen = minor, maxTime(g.seen, t)
	if level == 0 {
		delete(g.failing, condition)
		return
	}
	g.failing[condition] = level
	v.fail(fmt.Sprintf("%s: gpu_health{condition=%q} is %d", (&fault{faultKey: faultKey{gpu: gpu}, minor: minor}).gpuName(), condition, level))
}

// collection judges one collection of the node at data time t: its GPU count (configured < 0:
// not reported) and the GPUs' newest health. It reports whether the node has just passed enough
// collections in a row, for the gate to look at it at once. j.mu is held.
func (j *judge) collection(n *nodeHealth, detected, configured int64, t, now time.Time) (passed bool) {
	v := &n.validation
	if now.Sub(t) > j.cfg.MaxDataAge || !t.After(v.collected) {
		return false
	}
	v.collected = t
	reported := int64(0)
	for _, uuid := range slices.Sorted(maps.Keys(v.gpus)) {
		g := v.gpus[uuid]
		if t.Sub(g.seen) > j.cfg.MaxDataAge {
			delete(v.gpus, uuid) // a GPU taken out
			continue
		}
		reported++
		for _, condition := range slices.Sorted(maps.Keys(g.failing)) {
			v.fail(fmt.Sprintf("%s: gpu_health{condition=%q} is %d", (&fault{faultKey: faultKey{gpu: uuid}, minor: g.minor}).gpuName(), condition, g.failing[condition]))
			return false
		}
	}
	open := n.open()
	switch {
	case configured < 0:
		v.fail("the agent reports no configured_gpu_count (the gpu receiver's configured_gpu_count): without it no collection can show that every GPU is there")
	case detected != configured:
		v.fail(fmt.Sprintf("%d GPUs detected, %d configured", detected, configured))
	case reported < detected:
		v.fail(fmt.Sprintf("%d of the %d GPUs detected reported their health", reported, detected))
	case len(open) > 0:
		v.fail(open[0].describe())
	default:
		v.passes = append(v.passes, t)
		if extra := len(v.passes) - j.cfg.Validation.Passes; extra > 0 {
			v.passes = slices.Delete(v.passes, 0, extra)
		}
		return len(v.passes) == j.cfg.Validation.Passes
	}
	return false
}

// nodeCheck takes the newest run of otelcol-gpu-check the agent reports (gpu_node_check_status,
// gpu_node_check_timestamp_seconds) and reports whether it is a new one that passed, for the
// gate to look at the node at once. j.mu is held.
func (v *passRun) nodeCheck(status int64, ended time.Time) (passed bool) {
	if !ended.After(v.checkEnded) {
		return false // the same run, reported again at each collection, or an older one replayed
	}
	v.checkStatus, v.checkEnded = status, ended
	return status == 0
}

// checkVerdict says why the newest run of otelcol-gpu-check does not pass a node the gate has
// held since since, or "" when it does.
func (v *passRun) checkVerdict(since time.Time) string {
	ended := v.checkEnded.UTC().Format(time.RFC3339)
	switch {
	case v.checkEnded.IsZero():
		return "its agent has reported no run of otelcol-gpu-check (the gpu receiver's node_check)"
	case !v.checkEnded.After(since):
		return "otelcol-gpu-check has not run since the gate began holding the node (its newest run ended at " + ended + ")"
	case v.checkStatus == 1:
		return "otelcol-gpu-check's newest run (ended at " + ended + ") found the node unhealthy (its findings are in the agent's log)"
	case v.checkStatus != 0:
		return fmt.Sprintf("otelcol-gpu-check's newest run (ended at %s) could not check the node (status %d; the reason is in the agent's log)", ended, v.checkStatus)
	}
	return ""
}

// validated says whether node has passed validation::passes collections in a row, all of them
// after since, and (validation::require_check) a run of otelcol-gpu-check since; else why not,
// in words.
func (j *judge) validated(node string, since time.Time) (passed bool, why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	want := j.cfg.Validation.Passes
	n := j.nodes[node]
	if n == nil {
		return false, "its agent has reported no GPU health yet"
	}
	v := &n.validation
	after := 0
	if i := slices.IndexFunc(v.passes, func(t time.Time) bool { return t.After(since) }); i >= 0 {
		after = len(v.passes) - i
	}
	var whys []string
	if after < want {
		why = fmt.Sprintf("%d of %d healthy collections in a row so far", after, want)
		if v.failure != "" {
			why += "; the last failure: " + v.failure
		}
		whys = append(whys, why)
	}
	if j.cfg.Validation.RequireCheck {
		if why := v.checkVerdict(since); why != "" {
			whys = append(whys, why)
		}
	}
	return len(whys) == 0, strings.Join(whys, "; ")
}

// gate is the writer's validation gate: its policy and, in dry run, its records. Only the
// writer's loop uses it.
type gate struct {
	cfg    *ValidationConfig
	dryRun map[string]*validationRecord
}

func newGate(cfg *ValidationConfig) *gate {
	return &gate{cfg: cfg, dryRun: map[string]*validationRecord{}}
}

// passedWhy says, for the Event, what a node the gate lets in has shown.
func (g *gate) passedWhy() string {
	why := fmt.Sprintf("the node's agent reported %d healthy collections in a row (every GPU there, every gpu_health condition ok, no fault open)", g.cfg.Passes)
	if g.cfg.RequireCheck {
		why += " and a run of otelcol-gpu-check that passed"
	}
	return why
}

// taint is the gate's taint, as the node carries it, or nil.
func (g *gate) taint(node *corev1.Node) *corev1.Taint {
	i := slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == g.cfg.TaintKey && t.Effect == g.cfg.TaintEffect })
	if i < 0 {
		return nil
	}
	return &node.Spec.Taints[i]
}

// record is the gate's record of node: its annotation, or the dry run's record.
func (g *gate) record(node *corev1.Node) *validationRecord {
	if g.cfg.DryRun {
		return g.dryRun[node.Name]
	}
	v, ok := node.Annotations[AnnotationValidation]
	if !ok {
		return nil
	}
	rec := &validationRecord{}
	if json.Unmarshal([]byte(v), rec) != nil || rec.Since.IsZero() {
		// Edited by hand beyond reading: the gate starts over from now, and rewrites it.
		return nil
	}
	return rec
}

// withoutTaint is taints without the gate's: every other taint as it is.
func (g *gate) withoutTaint(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == g.cfg.TaintKey && t.Effect == g.cfg.TaintEffect })
}

// withTaint is taints with the gate's added, for a node the quarantine returns to service.
func (g *gate) withTaint(taints []corev1.Taint) []corev1.Taint {
	return append(g.withoutTaint(taints), corev1.Taint{Key: g.cfg.TaintKey, Effect: g.cfg.TaintEffect})
}

// validateNode applies the gate to one node: a node that carries its taint gets a record (since
// when the gate holds it), loses the taint once its agent has passed, and is left to a person
// with an Event once timeout has passed without that. A node without the taint is not the
// gate's, and the record of one whose taint someone removed goes.
func (w *writer) validateNode(ctx context.Context, node *corev1.Node, now time.Time) {
	g := w.gate
	taint := g.taint(node)
	rec := g.record(node)
	_, annotated := node.Annotations[AnnotationValidation]
	switch {
	case taint == nil && g.cfg.DryRun:
		delete(g.dryRun, node.Name)
		return
	case taint == nil:
		if annotated {
			// A person (or another tool) let the node in: the gate's record goes with its taint.
			w.patchValidation(ctx, node, nil, node.Spec.Taints, "", "")
		}
		return
	case rec == nil:
		rec = &validationRecord{By: w.by(), Since: now}
		if taint.TimeAdded != nil {
			rec.Since = taint.TimeAdded.Time
		}
		wants := fmt.Sprintf("%d healthy collections in a row", g.cfg.Passes)
		if g.cfg.RequireCheck {
			wants += " and a run of otelcol-gpu-check that passes"
		}
		text := fmt.Sprintf("held by the taint %s:%s until its agent reports %s, for at most %s (until %s)",
			g.cfg.TaintKey, g.cfg.TaintEffect, wants, g.cfg.Timeout, rec.Since.Add(g.cfg.Timeout).UTC().Format(time.RFC3339))
		if g.cfg.DryRun {
			g.dryRun[node.Name] = rec
			w.validationEvent(node, reasonValidationPending, reasonValidationDryRun, corev1.EventTypeNormal, "dry run: the node would be "+text+"; nothing is changed")
		} else if updated := w.patchValidation(ctx, node, rec, node.Spec.Taints, reasonValidationPending, "the node is "+text); updated != nil {
			node = updated
		} else {
			return
		}
	}
	if !rec.TimedOut.IsZero() || rec.passed {
		return // a person's now, or the dry run's said
	}
	passed, why := w.judge.validated(node.Name, rec.Since)
	switch {
	case passed && g.cfg.DryRun:
		rec.passed = true
		w.validationEvent(node, reasonValidationPassed, reasonValidationDryRun, corev1.EventTypeNormal,
			fmt.Sprintf("dry run: would have removed the taint %s:%s: %s; nothing is changed", g.cfg.TaintKey, g.cfg.TaintEffect, g.passedWhy()))
	case passed:
		w.patchValidation(ctx, node, nil, g.withoutTaint(node.Spec.Taints), reasonValidationPassed,
			fmt.Sprintf("removed the taint %s:%s: %s", g.cfg.TaintKey, g.cfg.TaintEffect, g.passedWhy()))
	case now.Sub(rec.Since) >= g.cfg.Timeout:
		rec.TimedOut = now
		text := fmt.Sprintf("validation did not pass within %s: %s. The taint %s:%s stays for a person: remove it to let the node in (kubectl taint node %s %s:%s-), or remove the annotation %s to validate again",
			g.cfg.Timeout, why, g.cfg.TaintKey, g.cfg.TaintEffect, node.Name, g.cfg.TaintKey, g.cfg.TaintEffect, AnnotationValidation)
		if g.cfg.DryRun {
			w.validationEvent(node, reasonValidationTimedOut, reasonValidationTimedOut, corev1.EventTypeWarning, "dry run: "+text)
			return
		}
		w.patchValidation(ctx, node, rec, node.Spec.Taints, reasonValidationTimedOut, text)
	}
}

// patchValidation writes the gate's record (nil: removes it) and the node's taints, on the
// node's resourceVersion, and reports it with an Event of reason (none if empty). It returns the
// node as written, nil when the write failed (retried on the next pass).
func (w *writer) patchValidation(ctx context.Context, node *corev1.Node, rec *validationRecord, taints []corev1.Taint, reason, text string) *corev1.Node {
	var value *string
	if rec != nil {
		record, _ := json.Marshal(rec)
		value = new(string(record))
	}
	patch := nodePatch{
		Metadata: nodeMeta{ResourceVersion: node.ResourceVersion, Annotations: map[string]*string{AnnotationValidation: value}},
		Spec:     nodeSpec{Taints: taints},
	}
	updated, err := w.patchNode(ctx, node, patch)
	if err != nil {
		w.validationEvent(node, reasonValidationFailed, reasonValidationFailed, corev1.EventTypeWarning, fmt.Sprintf("the validation gate could not write the node: %v; retried on the next pass", err))
		return nil
	}
	if reason != "" {
		typ := corev1.EventTypeNormal
		if reason == reasonValidationTimedOut {
			typ = corev1.EventTypeWarning
		}
		w.validationEvent(node, reason, reason, typ, text)
	}
	return updated
}

// validationEvent reports what the gate did, or in dry run would have done (step: the Event
// reason of the step done for real, so that each step has its own Event): a log line and an
// Event on the node.
func (w *writer) validationEvent(node *corev1.Node, step, reason, typ, text string) {
	now := w.clock.Now()
	if typ == corev1.EventTypeWarning {
		w.logger.Warn("GPU validation gate: "+text, zap.String("node", node.Name), zap.String("reason", reason))
	} else {
		w.logger.Info("GPU validation gate: "+text, zap.String("node", node.Name), zap.String("reason", reason))
	}
	w.recorder.add(node, validationEventKeys+step+"/"+reason, typ, reason, text, 1, now, now)
}

// recordValidation records the nodes the gate holds: waiting, or left to a person.
func (w *writer) recordValidation(ts pcommon.Timestamp) {
	g := w.gate
	for _, obj := range w.nodes.GetStore().List() {
		node := obj.(*corev1.Node)
		if g.taint(node) == nil {
			continue
		}
		rec := g.record(node)
		if rec == nil || rec.passed {
			continue
		}
		w.mb.RecordGpuNodeValidationPendingDataPoint(ts, 1, node.Name, !rec.TimedOut.IsZero(), g.cfg.DryRun)
	}
}
