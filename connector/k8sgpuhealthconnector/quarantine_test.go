// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

func TestEscalate(t *testing.T) {
	window := 7 * 24 * time.Hour
	reset := verdict{class: ActionResetGPU, action: ActionResetGPU, severity: xid.SeverityWarning, faults: "GPU 2 (GPU-2): a memory row remapping waits for a GPU reset"}
	returned := func(class, action Action, ago time.Duration) *releaseRecord {
		return &releaseRecord{At: t0.Add(-ago), Class: class, Action: action}
	}

	assert.Equal(t, reset, escalate(reset, nil, t0, window), "never quarantined")
	assert.Equal(t, reset, escalate(reset, returned(ActionReboot, ActionReboot, time.Hour), t0, window), "another class")
	assert.Equal(t, reset, escalate(reset, returned(ActionResetGPU, ActionResetGPU, 8*24*time.Hour), t0, window), "returned longer ago than the window")
	assert.Equal(t, reset, escalate(reset, returned(ActionResetGPU, ActionResetGPU, time.Hour), t0, 0), "escalation off")

	// reset → reboot → inspect the hardware, and fatal.
	v := escalate(reset, returned(ActionResetGPU, ActionResetGPU, time.Hour), t0, window)
	assert.Equal(t, ActionReboot, v.action)
	assert.Equal(t, ActionResetGPU, v.class)
	assert.Equal(t, xid.SeverityFatal, v.severity)
	assert.Equal(t, "reboot: "+ActionReboot.words()+" (escalated from reset_gpu: that class of fault came back soon after the node was returned to service). "+reset.faults, v.message())
	assert.Equal(t, ActionInspectHardware, escalate(reset, returned(ActionResetGPU, ActionReboot, time.Hour), t0, window).action)
	nvlink := verdict{class: ActionCheckNVLink, action: ActionCheckNVLink}
	assert.Equal(t, ActionInspectHardware, escalate(nvlink, returned(ActionCheckNVLink, ActionCheckNVLink, time.Hour), t0, window).action)
	assert.Equal(t, ActionInspectHardware, ActionInspectHardware.next(), "as far as it goes")

	healthy := verdict{healthy: true, reason: reasonHealthy}
	assert.Equal(t, healthy, escalate(healthy, returned(ActionResetGPU, ActionResetGPU, time.Hour), t0, window))
}

func TestWithTaint(t *testing.T) {
	theirs := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	ours := corev1.Taint{Key: TaintKey, Value: "reboot", Effect: corev1.TaintEffectNoSchedule}
	taints := []corev1.Taint{theirs, {Key: TaintKey, Value: "reset_gpu", Effect: corev1.TaintEffectNoSchedule}}
	assert.Equal(t, []corev1.Taint{theirs, ours}, withTaint(taints, true, ActionReboot), "ours replaced, theirs kept")
	assert.Equal(t, []corev1.Taint{theirs}, withTaint(taints, false, ""))
	assert.Equal(t, TaintKey, taints[1].Key, "the node's own list is left as it is")
	assert.Empty(t, withTaint(nil, false, ""))
}

func TestBreakerAllows(t *testing.T) {
	q := newQuarantine(&QuarantineConfig{Breaker: BreakerConfig{MaxShare: 0.1}})
	for _, c := range []struct {
		recent, gpuNodes int
		allows           bool
	}{
		{0, 30, true}, {2, 30, true}, {3, 30, false}, // 10 % of 30: three
		{0, 5, true}, {1, 5, false}, // always one, if nothing else is quarantined
		{0, 0, false}, // no GPU node known (not listed yet): nothing
	} {
		q.recent, q.gpuNodes = c.recent, c.gpuNodes
		assert.Equal(t, c.allows, q.allows(), "%d of %d", c.recent, c.gpuNodes)
	}
	q.cfg.Breaker.MaxNodes = 2
	q.recent, q.gpuNodes = 2, 1000
	assert.False(t, q.allows(), "max_nodes bounds the count too")
}

func TestQuarantineState(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		AnnotationQuarantine: `{"by":"otelcol-gpu k8s_gpu_health (gw_1)","at":"2026-12-01T12:00:00Z","class":"reset_gpu","action":"reboot","tainted":true}`,
		AnnotationReleased:   `not json`,
	}}, Spec: corev1.NodeSpec{Unschedulable: true}}
	q := newQuarantine(&QuarantineConfig{GPUResourceNames: []string{"nvidia.com/gpu"}})
	s := q.state(node)
	assert.True(t, s.cordoned)
	require.NotNil(t, s.ours)
	assert.Equal(t, quarantineRecord{By: "otelcol-gpu k8s_gpu_health (gw_1)", At: t0, Class: ActionResetGPU, Action: ActionReboot, Tainted: true}, *s.ours)
	assert.Nil(t, s.released, "an unreadable release is none")

	node.Annotations[AnnotationQuarantine] = "edited by hand"
	assert.NotNil(t, q.state(node).ours, "present, even unreadable, it is ours: never cordoned twice")

	// A dry run sees its own records, and the node's real cordon.
	q.cfg.DryRun = true
	assert.Equal(t, quarantineState{cordoned: true}, q.state(node), "someone's cordon, not the dry run's")
	q.dryRun["n1"] = &quarantineState{ours: &quarantineRecord{Action: ActionResetGPU}}
	node.Spec.Unschedulable = false
	assert.True(t, q.state(node).cordoned)

	assert.False(t, q.hasGPUs(node))
	node.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	assert.True(t, q.hasGPUs(node))
}

// TestRecordsAreMetadatas: the log records written by hand (mdatagen makes no logs builder for
// a connector) are the events metadata.yaml declares, with its attributes.
func TestRecordsAreMetadatas(t *testing.T) {
	events := metadatatest.Events(t, "metadata.yaml")
	sink := new(consumertest.LogsSink)
	cfg := createDefaultConfig().(*Config)
	cfg.Quarantine.Enabled = true
	w := newWriter(cfg, connectortest.NewNopSettings(metadata.Type))
	w.logger, w.logsOut = zap.NewNop(), sink
	w.recorder = newRecorder(nil, "test", time.Minute)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeApplied, verdict{action: ActionReboot, severity: xid.SeverityFatal}, reasonQuarantined, "cordoned")
	w.quarantine.breakerOpen = true
	w.breakerChanged(node, t0)

	got := map[string][]string{}
	for _, ld := range sink.AllLogs() {
		lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
		got[lr.EventName()] = slices.Sorted(maps.Keys(lr.Attributes().AsRaw()))
		assert.NotEmpty(t, lr.Body().Str())
		assert.NotEqual(t, pcommon.Timestamp(0), lr.Timestamp())
	}
	assert.Equal(t, events, got)
	assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeApplied}])
	assert.Len(t, w.recorder.entries, 2, "an Event each: the action and the trip")

	// An event switched off writes no record, and still an Event and a count.
	cfg.Events.GpuNodeQuarantine.Enabled = false
	w.quarantineAction(node, metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeDryRun, verdict{}, reasonDryRun, "dry run")
	assert.Len(t, sink.AllLogs(), 2)
	assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionCordon, metadata.AttributeOutcomeDryRun}])
}
