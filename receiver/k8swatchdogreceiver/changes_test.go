// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// step changes the cluster through the (fake) API and says how many log records that must add.
type step struct {
	name    string
	do      func(t *testing.T, h *harness)
	records int
}

func updatePod(ns, name string, change func(*corev1.Pod)) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		p, err := h.kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		change(p)
		_, err = h.kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func updateNode(name string, change func(*corev1.Node)) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		n, err := h.kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		change(n)
		_, err = h.kube.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func setNodeCond(n *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus, reason, message string) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason, n.Status.Conditions[i].Message = s, reason, message
		}
	}
}

// TestStatusChangeLogs drives every kind of status change through the informers, one step at a
// time so that the records' order is known, and compares all records with a golden file. Steps
// that must log nothing are followed by steps that log, so a stray record changes the count.
func TestStatusChangeLogs(t *testing.T) {
	h := newHarness(t, testConfig(), fixtureCluster()...)
	steps := []step{
		{"OOM-killed worker restarts", updatePod("default", "job1-worker-0", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
		}), 1},
		{"crash-looping proxy runs again", updatePod("pai", "rest-server-0", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1] = running("proxy")
		}), 1},
		{"queued pod is scheduled, its container is being created (not news)", updatePod("vc", "queued-0", func(p *corev1.Pod) {
			p.Spec.NodeName = "node-a"
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("main", "ContainerCreating")}
		}), 0},
		{"its image cannot be pulled", updatePod("vc", "queued-0", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/main"`}
		}), 1},
		{"it runs, then is OOM-killed and the pod fails", updatePod("vc", "queued-0", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
		}), 2},
		{"the same status again (no change)", updatePod("vc", "queued-0", func(*corev1.Pod) {}), 0},
		{"node-a stops posting status", updateNode("node-a", func(n *corev1.Node) {
			setNodeCond(n, corev1.NodeReady, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")
		}), 1},
		{"node-c heartbeat only (stripped, no change)", updateNode("node-c", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{}
			n.Labels["touched"] = "yes"
		}), 0},
		{"node-a is cordoned", updateNode("node-a", func(n *corev1.Node) { n.Spec.Unschedulable = true }), 1},
		{"node-b is uncordoned, its disk pressure ends, node-problem-detector's condition goes away", updateNode("node-b", func(n *corev1.Node) {
			n.Spec.Unschedulable = false
			setNodeCond(n, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "")
			n.Status.Conditions = n.Status.Conditions[:4]
		}), 3},
		{"a new pod (not a change)", func(t *testing.T, h *harness) {
			_, err := h.kube.CoreV1().Pods("default").Create(t.Context(),
				pod(podSpec{ns: "default", name: "new-0", phase: corev1.PodPending}), metav1.CreateOptions{})
			require.NoError(t, err)
		}, 0},
		{"the new pod starts running", updatePod("default", "new-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), 1},
	}
	want := 0
	for _, s := range steps {
		s.do(t, h)
		want += s.records
		if s.records == 0 {
			continue
		}
		poll.Until(t, 10*time.Second, "the records of "+s.name, func() bool { return h.logs.LogRecordCount() >= want })
		require.Equal(t, want, h.logs.LogRecordCount(), "after %q", s.name)
	}
	compareLogsGolden(t, "status-changes", merged(h.logs))
}

// TestResyncLogsNothing hands the handlers what a resync or an unchanged relist delivers: the
// same object twice.
func TestResyncLogsNothing(t *testing.T) {
	for _, obj := range fixtureCluster() {
		switch o := obj.(type) {
		case *corev1.Pod:
			assert.Empty(t, podChanges(o, o.DeepCopy()), o.Name)
		case *corev1.Node:
			assert.Empty(t, nodeChanges(o, o.DeepCopy()), o.Name)
		}
	}
}

// TestDisabledEventsAreNotSent switches off one event type: the record is not built, the others
// of the same update still are.
func TestDisabledEventsAreNotSent(t *testing.T) {
	cfg := testConfig()
	cfg.Events.K8sPodPhaseChanged.Enabled = false
	h := newHarness(t, cfg, fixtureCluster()...)
	updatePod("vc", "queued-0", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
	})(t, h)
	poll.Until(t, 10*time.Second, "the first update's record", func() bool { return h.logs.LogRecordCount() >= 1 })
	// A later update of the same informer with an enabled event: once its record is in, a stray
	// phase record of the first update would be in too.
	updatePod("default", "train-0", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
	})(t, h)
	poll.Until(t, 10*time.Second, "the second update's record", func() bool { return h.logs.LogRecordCount() >= 2 })
	records := merged(h.logs).ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	require.Equal(t, 2, records.Len())
	for i := 0; i < records.Len(); i++ {
		assert.Equal(t, "k8s.container.state.changed", records.At(i).EventName())
	}
}
