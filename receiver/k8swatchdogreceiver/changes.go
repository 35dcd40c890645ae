// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// Status changes are found by comparing the informer's old and new copy of an object, field by
// field, after stripping (transform.go). That is what makes each change logged exactly once:
//   - a resync or a relist that finds an object unchanged delivers equal copies: nothing is logged;
//   - a relist after an outage delivers the last copy seen before it and the current one: what
//     changed in between is logged once;
//   - heartbeats and other churn (node condition heartbeat times, managed fields) are stripped,
//     so they never look like changes.
// Objects seen for the first time (the initial list, pods created later) are not changes.

// absent is the old or new state of something that is not there on one side (a node condition
// that appears, a container the kubelet has not reported before).
const absent = "absent"

// change is one log record to emit: record adds it to the logs builder as its event.
type change struct {
	record   func(lb *metadata.LogsBuilder, ts pcommon.Timestamp)
	body     string
	severity plog.SeverityNumber
}

func (w *watchdog) onPodUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if ok1 && ok2 {
		w.emit(podChanges(o, n))
	}
}

func (w *watchdog) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 {
		w.emit(nodeChanges(o, n))
	}
}

// emit turns changes into log records, in the order they were found, and sends them on. Each
// is emitted on its own so that its body and severity can be set: the generated builder sets
// neither, and it would group a batch by event type rather than keep the order.
func (w *watchdog) emit(changes []change) {
	if len(changes) == 0 {
		return
	}
	ts := pcommon.NewTimestampFromTime(time.Now())
	w.logsMu.Lock()
	out := plog.NewLogs()
	var records plog.LogRecordSlice
	for _, c := range changes {
		c.record(w.lb, ts)
		one := w.lb.Emit(metadata.WithLogsResource(w.resource))
		if one.ResourceLogs().Len() == 0 {
			continue // this event is disabled in the config
		}
		lr := one.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
		lr.SetObservedTimestamp(ts)
		lr.SetSeverityNumber(c.severity)
		lr.SetSeverityText(c.severity.String())
		lr.Body().SetStr(c.body)
		if out.ResourceLogs().Len() == 0 {
			one.CopyTo(out)
			records = out.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		} else {
			lr.MoveTo(records.AppendEmpty())
		}
	}
	w.logsMu.Unlock()
	if out.LogRecordCount() == 0 {
		return
	}
	// runCtx ends at shutdown, so that a blocked pipeline cannot hold the informers up.
	if err := w.logs.ConsumeLogs(w.runCtx, out); err != nil {
		w.logger.Warn("Status-change log records were dropped", zap.Int("records", out.LogRecordCount()), zap.Error(err))
	}
}

func podChanges(o, n *corev1.Pod) []change {
	var out []change
	ns, pod, node := n.Namespace, n.Name, n.Spec.NodeName
	if o.Status.Phase != n.Status.Phase {
		oldPhase, newPhase := orAbsent(string(o.Status.Phase)), orAbsent(string(n.Status.Phase))
		opts := detail(n.Status.Reason, n.Status.Message)
		sev := plog.SeverityNumberInfo
		if n.Status.Phase == corev1.PodFailed || n.Status.Phase == corev1.PodUnknown {
			sev = plog.SeverityNumberWarn
		}
		out = append(out, change{
			record: func(lb *metadata.LogsBuilder, ts pcommon.Timestamp) {
				lb.RecordK8sPodPhaseChangedEvent(context.Background(), ts, ns, pod, node, oldPhase, newPhase, opts...)
			},
			body:     fmt.Sprintf("pod %s/%s phase %s -> %s%s", ns, pod, oldPhase, newPhase, because(n.Status.Reason, n.Status.Message)),
			severity: sev,
		})
	}
	out = append(out, containerChanges(ns, pod, node, o.Status.InitContainerStatuses, n.Status.InitContainerStatuses)...)
	out = append(out, containerChanges(ns, pod, node, o.Status.ContainerStatuses, n.Status.ContainerStatuses)...)
	return out
}

func containerChanges(ns, pod, node string, olds, news []corev1.ContainerStatus) []change {
	var out []change
	for j := range news {
		n := &news[j]
		container := n.Name
		oldKind, oldReason := absent, ""
		var o *corev1.ContainerStatus
		for i := range olds {
			if olds[i].Name == n.Name {
				o = &olds[i]
				oldKind, oldReason = containerState(o.State)
			}
		}
		newKind, newReason := containerState(n.State)
		if o != nil && n.RestartCount > o.RestartCount {
			restarts := int64(n.RestartCount)
			var opts []metadata.EventAttributeOption
			how := ""
			if t := n.LastTerminationState.Terminated; t != nil {
				opts = append(detail(t.Reason, ""), metadata.WithExitCodeEventAttribute(int64(t.ExitCode)))
				how = fmt.Sprintf(" (previous run ended: %s, exit code %d)", orAbsent(t.Reason), t.ExitCode)
			}
			out = append(out, change{
				record: func(lb *metadata.LogsBuilder, ts pcommon.Timestamp) {
					lb.RecordK8sContainerRestartedEvent(context.Background(), ts, ns, pod, node, container, restarts, opts...)
				},
				body:     fmt.Sprintf("container %s/%s/%s restarted, restart count %d%s", ns, pod, container, restarts, how),
				severity: plog.SeverityNumberWarn,
			})
		}
		if oldKind == newKind && oldReason == newReason {
			continue
		}
		// The first report of a container that is still being created is not news; one that
		// starts out failing (or already running) is.
		if o == nil && newKind == "waiting" && (newReason == "ContainerCreating" || newReason == "PodInitializing") {
			continue
		}
		message := ""
		var opts []metadata.EventAttributeOption
		switch {
		case n.State.Waiting != nil:
			message = n.State.Waiting.Message
		case n.State.Terminated != nil:
			message = n.State.Terminated.Message
			opts = append(opts, metadata.WithExitCodeEventAttribute(int64(n.State.Terminated.ExitCode)))
		}
		opts = append(opts, detail(newReason, message)...)
		oldState, newState := oldKind, newKind
		out = append(out, change{
			record: func(lb *metadata.LogsBuilder, ts pcommon.Timestamp) {
				lb.RecordK8sContainerStateChangedEvent(context.Background(), ts, ns, pod, node, container, oldState, newState, opts...)
			},
			body:     fmt.Sprintf("container %s/%s/%s %s -> %s%s", ns, pod, container, withReason(oldKind, oldReason), newKind, because(newReason, message)),
			severity: containerSeverity(newKind, newReason),
		})
	}
	return out
}

// containerSeverity flags the states an operator acts on: a container that ended other than
// successfully, or that waits for something other than its own start.
func containerSeverity(kind, reason string) plog.SeverityNumber {
	switch {
	case kind == "terminated" && reason != "Completed":
		return plog.SeverityNumberWarn
	case kind == "waiting" && reason != "" && reason != "ContainerCreating" && reason != "PodInitializing":
		return plog.SeverityNumberWarn
	}
	return plog.SeverityNumberInfo
}

func nodeChanges(o, n *corev1.Node) []change {
	var out []change
	node := n.Name
	olds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range o.Status.Conditions {
		olds[c.Type] = c
	}
	seen := map[corev1.NodeConditionType]bool{}
	report := func(t corev1.NodeConditionType, oldStatus, newStatus, reason, message string, healthy bool) {
		condition := string(t)
		opts := detail(reason, message)
		sev := plog.SeverityNumberInfo
		if !healthy {
			sev = plog.SeverityNumberWarn
		}
		out = append(out, change{
			record: func(lb *metadata.LogsBuilder, ts pcommon.Timestamp) {
				lb.RecordK8sNodeConditionChangedEvent(context.Background(), ts, node, condition, oldStatus, newStatus, opts...)
			},
			body:     fmt.Sprintf("node %s condition %s %s -> %s%s", node, condition, oldStatus, newStatus, because(reason, message)),
			severity: sev,
		})
	}
	for _, c := range n.Status.Conditions {
		seen[c.Type] = true
		oldStatus := absent
		if oc, ok := olds[c.Type]; ok {
			oldStatus = string(oc.Status)
		}
		if oldStatus != string(c.Status) {
			report(c.Type, oldStatus, string(c.Status), c.Reason, c.Message, conditionHealthy(c.Type, c.Status))
		}
	}
	for _, c := range o.Status.Conditions {
		if !seen[c.Type] {
			report(c.Type, string(c.Status), absent, "", "", true)
		}
	}
	if o.Spec.Unschedulable != n.Spec.Unschedulable {
		oldState, newState, verb := "schedulable", "cordoned", "cordoned"
		if !n.Spec.Unschedulable {
			oldState, newState, verb = "cordoned", "schedulable", "uncordoned"
		}
		out = append(out, change{
			record: func(lb *metadata.LogsBuilder, ts pcommon.Timestamp) {
				lb.RecordK8sNodeSchedulableChangedEvent(context.Background(), ts, node, oldState, newState)
			},
			body:     fmt.Sprintf("node %s %s", node, verb),
			severity: plog.SeverityNumberInfo,
		})
	}
	return out
}

// conditionHealthy: Ready is good when True, every other condition (the pressures,
// NetworkUnavailable, node-problem-detector's KernelDeadlock...) when False.
func conditionHealthy(t corev1.NodeConditionType, s corev1.ConditionStatus) bool {
	if t == corev1.NodeReady {
		return s == corev1.ConditionTrue
	}
	return s == corev1.ConditionFalse
}

func detail(reason, message string) []metadata.EventAttributeOption {
	var opts []metadata.EventAttributeOption
	if reason != "" {
		opts = append(opts, metadata.WithReasonEventAttribute(reason))
	}
	if message != "" {
		opts = append(opts, metadata.WithMessageEventAttribute(message))
	}
	return opts
}

func orAbsent(s string) string {
	if s == "" {
		return absent
	}
	return s
}

func withReason(kind, reason string) string {
	if reason == "" {
		return kind
	}
	return kind + " (" + reason + ")"
}

func because(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return ": " + reason + ": " + message
	case reason != "" || message != "":
		return ": " + reason + message
	}
	return ""
}
