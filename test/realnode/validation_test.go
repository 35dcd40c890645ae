// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// What the validation gate writes (the connector's README, docs/actions.md).
const (
	gateTaintKey         = "otelcol-gpu.io/validation-pending"
	annotationValidation = "otelcol-gpu.io/validation"
	// gateTimeout is the test's validation::timeout: long enough for three collections (10 s
	// apart), short enough to wait for.
	gateTimeout = 2 * time.Minute
)

// othersTaint is a taint of someone else's that the node registers with beside the gate's;
// PreferNoSchedule, so that it keeps no pod away.
var othersTaint = corev1.Taint{Key: "example.com/burn-in", Value: "kept", Effect: corev1.TaintEffectPreferNoSchedule}

// testValidationGate: the node joins with the gate's taint (the kubelet's --register-with-taints)
// while the chart's validationGate is on. The agent runs there (it tolerates the taint) and
// reports the scenario's XID 48 on GPU 1: the gate keeps the taint, and at its timeout raises a
// Warning Event naming the GPU. Marked resolved and validated again, the node passes once its
// agent has also run otelcol-gpu-check (every 20 s here) and it passed: the gate's taint goes,
// the other taint stays byte for byte.
func testValidationGate(t *testing.T) {
	t.Cleanup(func() {
		resetGPUHealth(t)
		n := getNode(t)
		var taints []corev1.Taint
		for _, taint := range n.Spec.Taints {
			if taint.Key != gateTaintKey && taint.Key != othersTaint.Key {
				taints = append(taints, taint)
			}
		}
		if len(taints) != len(n.Spec.Taints) {
			n.Spec.Taints = taints
			// In a Cleanup, where t.Context() is already canceled.
			_, err := node.Admin.CoreV1().Nodes().Update(context.WithoutCancel(t.Context()), n, metav1.UpdateOptions{})
			assert.NoError(t, err)
		}
		patchNode(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotationValidation: nil}}})
	})

	// The gate on, for real, with a short timeout, and the health test's quarantine off; the agent told how many GPUs the node has (the
	// gate's count), and an XID's mark on gpu_health kept for a minute instead of an hour.
	values := filepath.Join(t.TempDir(), "validation.yaml")
	require.NoError(t, os.WriteFile(values, fmt.Appendf(nil, `validationGate: {enabled: true, dryRun: false}
quarantine: {enabled: false}
gateway:
  extraArgs: [--set=connectors::k8s_gpu_health::validation::timeout=%s]
agent:
  extraArgs:
    - --set=receivers::gpu::backend=simulated
    - --set=receivers::gpu::scenario=/etc/otelcol-gpu/scenario/scenario.yaml
    - --set=receivers::gpu::configured_gpu_count=%d
    - --set=receivers::gpu::xid::health_window=1m
    - --set=receivers::gpu::node_check::interval=20s
`, gateTimeout, len(gpus)), 0o600))
	out, err := helm(t, "upgrade", release, filepath.Join(stack.RepoRoot(), "deploy", "helm", "otelcol-gpu"), "--namespace", namespace,
		"--reuse-values", "--values", values)
	require.NoError(t, err, out)
	// The health test's clean-up scaled the gateway to 0, which an upgrade leaves as it is.
	out, err = node.Kubectl(nil, "scale", "-n", namespace, "deployment/otelcol-gpu-gateway", "--replicas=1")
	require.NoError(t, err, out)
	rolledOut(t, "daemonset/otelcol-gpu-agent", "deployment/otelcol-gpu-gateway")

	registrations := node.Plugin.Registrations()
	require.NoError(t, node.Reregister(t.Context(), "--register-with-taints="+gateTaintKey+"=:NoSchedule,"+othersTaint.Key+"="+othersTaint.Value+":"+string(othersTaint.Effect)))
	registered := getNode(t)
	require.NotNil(t, gateTaint(registered), "the kubelet registered the node with the gate's taint: %v", registered.Spec.Taints)
	kubeletBack(t, registrations)

	// The agent runs on the tainted node, and reports XID 48: the gate holds the node, and at its
	// timeout leaves it to a person.
	pending := waitEvents(t, "GPUValidationPending")
	assert.Contains(t, pending[0].Message, "held by the taint "+gateTaintKey+":NoSchedule until its agent reports 3 healthy collections in a row and a run of otelcol-gpu-check that passes")
	timedOut := waitEvents(t, "GPUValidationTimedOut")
	assert.Equal(t, corev1.EventTypeWarning, timedOut[0].Type)
	assert.Contains(t, timedOut[0].Message, "validation did not pass within "+gateTimeout.String())
	assert.Contains(t, timedOut[0].Message, "GPU 1 ("+gpus[1].UUID, "the last failure names the faulty GPU: %s", timedOut[0].Message)
	n := getNode(t)
	assert.NotNil(t, gateTaint(n), "the taint stays after the timeout")
	var rec struct {
		TimedOut time.Time `json:"timed_out"`
	}
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[annotationValidation]), &rec))
	assert.False(t, rec.TimedOut.IsZero(), "the gate's record says its time ran out: %s", n.Annotations[annotationValidation])

	// A person resets the GPU, marks the faults resolved and asks for another validation: three
	// healthy collections later the gate's taint is gone, and only it.
	patchNode(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		annotationResolved: time.Now().UTC().Format(time.RFC3339), annotationValidation: nil,
	}}})
	n = waitNode(t, "the gate's taint removed", func(n *corev1.Node) error {
		if taint := gateTaint(n); taint != nil {
			return fmt.Errorf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
		}
		return nil
	})
	passed := waitEvents(t, "GPUValidationPassed")
	assert.Contains(t, passed[0].Message, "removed the taint "+gateTaintKey+":NoSchedule")
	assert.Contains(t, passed[0].Message, "and a run of otelcol-gpu-check that passed", "the image's check ran under the agent, in its pod")
	assert.NotContains(t, n.Annotations, annotationValidation)
	want, err := json.Marshal(othersTaint)
	require.NoError(t, err)
	var kept []string
	for _, taint := range n.Spec.Taints {
		if taint.Key == othersTaint.Key {
			b, err := json.Marshal(taint)
			require.NoError(t, err)
			kept = append(kept, string(b))
		}
	}
	assert.Equal(t, []string{string(want)}, kept, "the other taint, byte for byte")
}

func gateTaint(n *corev1.Node) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == gateTaintKey {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}
