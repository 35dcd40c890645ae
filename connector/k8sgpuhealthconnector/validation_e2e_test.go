// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8sgpuhealthconnector

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// gatedTaint is the gate's default taint, as a kubelet registers with it.
var gatedTaint = corev1.Taint{Key: ValidationTaintKey, Effect: corev1.TaintEffectNoSchedule}

// othersTaints are taints of others on a gated node; the gate must leave them byte for byte.
func othersTaints() []corev1.Taint {
	added := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	return []corev1.Taint{
		{Key: "example.com/maintenance", Value: "rack-7", Effect: corev1.TaintEffectNoSchedule},
		{Key: ValidationTaintKey, Value: "other-effect", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added},
		{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectPreferNoSchedule},
	}
}

// createGatedNode is a GPU node that joined with the gate's taint among others'.
func createGatedNode(t *testing.T, admin kubernetes.Interface, name string) {
	t.Helper()
	createGPUNode(t, admin, name)
	changeNode(t, admin, name, func(n *corev1.Node) {
		others := othersTaints()
		n.Spec.Taints = append([]corev1.Taint{others[0], gatedTaint}, others[1:]...)
	})
}

// collectOn sends one collection of node's two GPUs (levels for GPU 1; nil: healthy) and its
// GPU count and its node check, at the clock's time.
func (tw *testWriter) collectOn(node string, gpu1 map[string]int64) {
	at := tw.clk.Now()
	tw.send(gpuOn(node, 0).healthy(at))
	if gpu1 == nil {
		tw.send(gpuOn(node, 1).healthy(at))
	} else {
		tw.send(gpuOn(node, 1).health(at, gpu1))
	}
	tw.send(gpuCountOf(node, at, 2, 2))
	// The agent's node check, as if it ran at every collection: it fails with the GPU.
	check := int64(0)
	if gpu1 != nil {
		check = 1
	}
	tw.send(nodeCheckOf(node, at, check, at))
}

func gateRecord(t *testing.T, n *corev1.Node) validationRecord {
	t.Helper()
	var r validationRecord
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[AnnotationValidation]), &r))
	return r
}

func taintsJSON(t *testing.T, taints []corev1.Taint) string {
	t.Helper()
	b, err := json.Marshal(taints)
	require.NoError(t, err)
	return string(b)
}

// TestValidationGate runs the gate on the real API server, with deploy/'s RBAC: a node that
// joined with the taint loses it, and only it, after three healthy collections; a node with a
// faulty GPU keeps it past the timeout, with an Event, and stays left to a person; a node the
// quarantine returns to service comes back through the gate.
func TestValidationGate(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, func(cfg *Config) {
		cfg.Validation.Enabled, cfg.Validation.DryRun, cfg.Validation.Timeout = true, false, 10*time.Minute
		quarantineOn(cfg)
		cfg.Quarantine.Breaker.MaxShare = 1
	})
	tw.waitLeading()
	for _, n := range []string{"v-pass", "v-fault"} {
		createGatedNode(t, admin, n)
	}

	t.Run("healthy passes remove the taint and nothing else", func(t *testing.T) {
		n := waitNode(t, admin, "v-pass", "held by the gate", func(n *corev1.Node) error {
			if n.Annotations[AnnotationValidation] == "" {
				tw.tick()
				return fmt.Errorf("annotations %v", n.Annotations)
			}
			return nil
		})
		assert.Equal(t, "otelcol-gpu k8s_gpu_health ("+tw.w.identity+")", gateRecord(t, n).By)
		waitEvent(t, admin, "v-pass", reasonValidationPending, 1, nil)
		for range 2 {
			clk.Advance(10 * time.Second)
			tw.collectOn("v-pass", nil)
		}
		tw.tick()
		tw.tick()
		require.NotNil(t, (&gate{cfg: &tw.w.cfg.Validation}).taint(getNode(t, admin, "v-pass")), "two passes of three")
		clk.Advance(10 * time.Second)
		tw.collectOn("v-pass", nil)
		n = waitNode(t, admin, "v-pass", "let in", func(n *corev1.Node) error {
			if len(n.Spec.Taints) != len(othersTaints()) || n.Annotations[AnnotationValidation] != "" {
				tw.tick()
				return fmt.Errorf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
			}
			return nil
		})
		assert.Equal(t, taintsJSON(t, othersTaints()), taintsJSON(t, n.Spec.Taints), "the others' taints, byte for byte")
		ev := waitEvent(t, admin, "v-pass", reasonValidationPassed, 1, nil)
		assert.Contains(t, ev.Message, "removed the taint otelcol-gpu.io/validation-pending:NoSchedule: the node's agent reported 3 healthy collections in a row")
		assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	})

	t.Run("a faulty GPU keeps the taint past the timeout", func(t *testing.T) {
		for range 3 {
			clk.Advance(10 * time.Second)
			tw.collectOn("v-fault", map[string]int64{"row_remap": 1})
		}
		clk.Advance(10 * time.Minute)
		ev := waitEvent(t, admin, "v-fault", reasonValidationTimedOut, 1, tw.tick)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Message, `validation did not pass within 10m0s: 0 of 3 healthy collections in a row so far; the last failure: GPU 1 (GPU-v-fault-1): gpu_health{condition="row_remap"} is 1`)
		n := getNode(t, admin, "v-fault")
		assert.False(t, gateRecord(t, n).TimedOut.IsZero())
		assert.Equal(t, taintsJSON(t, append([]corev1.Taint{othersTaints()[0], gatedTaint}, othersTaints()[1:]...)), taintsJSON(t, n.Spec.Taints), "every taint stays")

		// Healthy after the timeout: left to a person all the same, and reported once.
		for range 3 {
			clk.Advance(10 * time.Second)
			tw.collectOn("v-fault", nil)
		}
		tw.tick()
		tw.tick()
		assert.Equal(t, taintsJSON(t, n.Spec.Taints), taintsJSON(t, getNode(t, admin, "v-fault").Spec.Taints))
		assert.Equal(t, int32(1), waitEvent(t, admin, "v-fault", reasonValidationTimedOut, 1, nil).Count)
		tw.metricsNow(t)
		assert.Equal(t, map[string]int64{"dry_run=false,node_name=v-fault,timed_out=true": 1}, points(tw.out.AllMetrics()[0], "gpu_node_validation_pending"))

		// A person asks for another validation: the annotation goes, the gate starts over.
		changeNode(t, admin, "v-fault", func(n *corev1.Node) { delete(n.Annotations, AnnotationValidation) })
		waitNode(t, admin, "v-fault", "let in after a new validation", func(n *corev1.Node) error {
			if (&gate{cfg: &tw.w.cfg.Validation}).taint(n) != nil {
				clk.Advance(10 * time.Second)
				tw.collectOn("v-fault", nil)
				tw.tick()
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			return nil
		})
	})

	t.Run("a node the quarantine returns to service comes back through the gate", func(t *testing.T) {
		clk.Advance(time.Second)
		tw.sendLogs(gpuOn("v-pass", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
		waitNode(t, admin, "v-pass", "quarantined", quarantined)
		reboot(t, admin, "v-pass", "boot-2")
		waitCondition(t, admin, "v-pass", corev1.ConditionTrue, reasonHealthy)
		clk.Advance(10 * time.Minute)
		n := waitNode(t, admin, "v-pass", "returned to service, gated", func(n *corev1.Node) error {
			if n.Spec.Unschedulable || n.Annotations[AnnotationQuarantine] != "" {
				tw.tick()
				return fmt.Errorf("unschedulable %t, annotations %v", n.Spec.Unschedulable, n.Annotations)
			}
			return nil
		})
		assert.Equal(t, taintsJSON(t, append(othersTaints(), gatedTaint)), taintsJSON(t, n.Spec.Taints))
		assert.Equal(t, released(t, n).At.UTC(), gateRecord(t, n).Since.UTC(), "gated since its return to service")
		assert.Contains(t, waitEvent(t, admin, "v-pass", reasonReleased, 1, nil).Message, "; tainted otelcol-gpu.io/validation-pending:NoSchedule until the validation gate passes it")

		for range 3 {
			clk.Advance(10 * time.Second)
			tw.collectOn("v-pass", nil)
		}
		n = waitNode(t, admin, "v-pass", "let in again", func(n *corev1.Node) error {
			if n.Annotations[AnnotationValidation] != "" {
				tw.tick()
				return fmt.Errorf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
			}
			return nil
		})
		assert.Equal(t, taintsJSON(t, othersTaints()), taintsJSON(t, n.Spec.Taints))
	})
}

// TestValidationGateDryRun: in dry run the gate says what it would do, and changes no node.
func TestValidationGateDryRun(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, func(cfg *Config) { cfg.Validation.Enabled = true })
	tw.waitLeading()
	createGatedNode(t, admin, "v-dry")
	before := getNode(t, admin, "v-dry")
	// The gate holds the node from when it first sees it: collections before do not count.
	waitEvent(t, admin, "v-dry", reasonValidationDryRun, 1, tw.tick)
	for range 3 {
		clk.Advance(10 * time.Second)
		tw.collectOn("v-dry", nil)
	}
	poll.UntilNoError(t, eventually, "the dry run's Event", func() error {
		for _, ev := range nodeEvents(t, admin, "v-dry")[reasonValidationDryRun] {
			if strings.Contains(ev.Message, "dry run: would have removed the taint otelcol-gpu.io/validation-pending:NoSchedule") {
				return nil
			}
		}
		tw.w.poke()
		return fmt.Errorf("events %v", nodeEvents(t, admin, "v-dry"))
	})
	after := getNode(t, admin, "v-dry")
	assert.Equal(t, taintsJSON(t, before.Spec.Taints), taintsJSON(t, after.Spec.Taints))
	assert.Equal(t, before.Annotations, after.Annotations)
}
