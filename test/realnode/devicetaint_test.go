// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// The device taint test's fault, GPU and claim.
const (
	// faultyDRAGPU is the DRA GPU the fault is moved to: free, and the first free device in the
	// driver's ResourceSlice, which the scheduler would give a new claim were it not tainted.
	faultyDRAGPU = 6
	// spareDRAGPU is the one left for a new claim (GPU 5 is frank's).
	spareDRAGPU = 7
	// The quarantine's label on its DeviceTaintRules (the connector's README).
	ruleSelector = "app.kubernetes.io/managed-by=otelcol-gpu-k8s-gpu-health"
	// uncordonAfter is the test's quarantine::uncordon_after: how long GPUHealthy stays True
	// before the rule goes.
	uncordonAfter = 30 * time.Second
)

// The scenario's fault (testdata/scenario.yaml) and the same on the DRA GPU.
const scenarioFault = "{at: 30s, gpu: 1, kind: xid, xid: 48}"

var draFault = fmt.Sprintf("{at: 30s, gpu: %d, kind: xid, xid: 48}", faultyDRAGPU)

// The new claim and its pod, in frank's namespace (testdata/dra.yaml's DeviceClass).
const (
	spareClaim, sparePod = "llama-gpu-spare", "llama-eval-0"
	spareManifest        = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + spareClaim + `, namespace: ` + draNamespace + `}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: ` + draDriver + `, allocationMode: ExactCount, count: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: ` + sparePod + `, namespace: ` + draNamespace + `}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims:
    - {name: gpu, resourceClaimName: ` + spareClaim + `}
  containers:
    - name: eval
      image: localhost/realnode/busybox:1.35
      imagePullPolicy: Never
      command: [/bin/busybox, sleep, "86400"]
      resources:
        claims: [{name: gpu}]
`
)

// testDeviceTaint: one GPU out, not the node. The API server, scheduler and controller manager
// run with DRADeviceTaints and resource.k8s.io/v1alpha3 (node.go); the DRA driver publishes GPUs
// 5, 6 and 7, of which frank's claim holds GPU 5. The scenario's XID 48 is moved to GPU 6 and the
// chart's quarantine switched on for real, its device_taint as the connector's defaults have it
// (the driver gpu.nvidia.com, NoSchedule): the gateway makes one DeviceTaintRule, for GPU 6's
// device, and neither cordons nor taints the node. A new claim is then given GPU 7 by the
// scheduler (GPU 6, the first free device, is tainted), and its pod runs. Marked resolved, the
// node's GPUHealthy turns True and uncordon_after later the rule is deleted.
func testDeviceTaint(t *testing.T, w *workload) {
	ctx := context.WithoutCancel(t.Context())
	rules := node.Admin.ResourceV1alpha3().DeviceTaintRules()
	t.Cleanup(func() {
		out, err := node.Kubectl([]byte(spareManifest), "delete", "--ignore-not-found", "--timeout=2m", "-f", "-")
		assert.NoError(t, err, out)
		// The gateway stopped first: it would make the rule again.
		resetGPUHealth(t)
		assert.NoError(t, rules.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: ruleSelector}), "deleting the quarantine's DeviceTaintRules")
	})

	// The running agent's XID 48 on GPU 1 is in the past (reported, not waiting in its queue),
	// and the node as it was before the gateway wrote on it, the gateway stopped: a test run
	// alone starts as one run after the others.
	poll.UntilNoError(t, waitFor, "the running agent to report the scenario's XID 48 on GPU 1", func() error {
		p, scrapeErr := scrape(agentMetrics)
		if scrapeErr != nil {
			return scrapeErr
		}
		if xid := p.find("gpu_xid_errors_total", labels("xid", "48", "uuid", gpus[1].UUID)); len(xid) != 1 || xid[0].value < 1 {
			return fmt.Errorf("gpu_xid_errors_total %v", xid)
		}
		return nil
	})
	resetGPUHealth(t)

	// The scenario with its fault on GPU 6, and an agent that plays it from the start.
	require.Equal(t, 1, bytes.Count(w.scenario, []byte(scenarioFault)), "the scenario's fault %s", scenarioFault)
	scenario := bytes.Replace(w.scenario, []byte(scenarioFault), []byte(draFault), 1)
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(path, scenario, 0o600))
	out, err := node.Kubectl(nil, "create", "configmap", "otelcol-gpu-scenario", "-n", namespace,
		"--from-file=scenario.yaml="+path, "--dry-run=client", "-o", "yaml")
	require.NoError(t, err, out)
	out, err = node.Kubectl([]byte(out), "apply", "-f", "-")
	require.NoError(t, err, out)

	// The quarantine on, for real, with a short uncordon_after; the gate off.
	values := filepath.Join(t.TempDir(), "devicetaint.yaml")
	require.NoError(t, os.WriteFile(values, fmt.Appendf(nil, `quarantine: {enabled: true, dryRun: false}
validationGate: {enabled: false}
gateway:
  extraArgs:
    - --set=connectors::k8s_gpu_health::quarantine::uncordon_after=%s
    - --set=connectors::k8s_gpu_health::quarantine::device_taint::drivers=[%s]
`, uncordonAfter, draDriver), 0o600))
	out, err = helm(t, "upgrade", release, filepath.Join(stack.RepoRoot(), "deploy", "helm", "otelcol-gpu"), "--namespace", namespace,
		"--reuse-values", "--values", values)
	require.NoError(t, err, out)
	out, err = node.Kubectl(nil, "rollout", "restart", "-n", namespace, "daemonset/otelcol-gpu-agent")
	require.NoError(t, err, out)
	// The last clean-up scaled the gateway to 0, which an upgrade leaves as it is.
	out, err = node.Kubectl(nil, "scale", "-n", namespace, "deployment/otelcol-gpu-gateway", "--replicas=1")
	require.NoError(t, err, out)
	rolledOut(t, "daemonset/otelcol-gpu-agent", "deployment/otelcol-gpu-gateway")

	// One rule, for GPU 6's device alone.
	faulty, spare := fmt.Sprintf("gpu-%d", faultyDRAGPU), fmt.Sprintf("gpu-%d", spareDRAGPU)
	var rule resourcev1alpha3.DeviceTaintRule
	if err = poll.For(healthWait, func() error {
		list, listErr := rules.List(t.Context(), metav1.ListOptions{})
		if listErr != nil {
			return listErr
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d DeviceTaintRules: %v", len(list.Items), list.Items)
		}
		rule = list.Items[0]
		return nil
	}); err != nil {
		logs, _ := node.Kubectl(nil, "logs", "-n", namespace, "deployment/otelcol-gpu-gateway", "--tail=30")
		t.Fatalf("waited %s for the gateway's DeviceTaintRule of GPU %d: %v; the node's GPUHealthy: %+v; the gateway's log:\n%s",
			healthWait, faultyDRAGPU, err, conditionNow(t), logs)
	}
	sel := rule.Spec.DeviceSelector
	require.NotNil(t, sel, "the rule selects a device: %v", rule)
	assert.Equal(t, draDriver, deref(sel.Driver), "the rule's driver")
	assert.Equal(t, realnode.NodeName, deref(sel.Pool), "the rule's pool, the node's")
	assert.Equal(t, faulty, deref(sel.Device), "the rule selects GPU %d's device", faultyDRAGPU)
	assert.Equal(t, resourcev1alpha3.DeviceTaint{Key: taintKey, Value: "reset_gpu", Effect: resourcev1alpha3.DeviceTaintEffectNoSchedule},
		withoutTime(rule.Spec.Taint), "the rule's taint")
	assert.Equal(t, "otelcol-gpu-k8s-gpu-health", rule.Labels["app.kubernetes.io/managed-by"], "the quarantine's label")
	assert.Contains(t, rule.Annotations[annotationQuarantine], gpus[faultyDRAGPU].UUID, "the rule's record names the GPU")

	// The node is left in service: no cordon, no taint of ours, no node quarantine; its
	// condition names the fault on GPU 6 all the same, and an Event the device taken out.
	cond := currentCondition(t)
	assert.Equal(t, corev1.ConditionFalse, cond.Status, "GPUHealthy: %q", cond.Message)
	assert.Contains(t, cond.Message, fmt.Sprintf("GPU %d (%s", faultyDRAGPU, gpus[faultyDRAGPU].UUID), "the condition names the faulty GPU")
	assert.NotContains(t, cond.Message, gpus[1].UUID, "the scenario's own fault on GPU 1 is gone")
	tainted := waitEvents(t, "GPUDeviceTainted")
	assert.Contains(t, tainted[0].Message, draDriver+"/"+realnode.NodeName+"/"+faulty, "the Event names the device")
	assert.Contains(t, tainted[0].Message, rule.Name, "the Event names the rule")
	inService(t)

	// A new claim: the scheduler passes over GPU 6 (tainted) and GPU 5 (frank's) and gives it GPU
	// 7; the kubelet has the driver prepare it and the pod runs.
	out, err = node.Kubectl([]byte(spareManifest), "apply", "-f", "-")
	require.NoError(t, err, out)
	waitRunning(t, draNamespace, sparePod)
	claim, err := node.Admin.ResourceV1().ResourceClaims(draNamespace).Get(t.Context(), spareClaim, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation, "the scheduler allocated the new claim")
	if assert.Len(t, claim.Status.Allocation.Devices.Results, 1) {
		r := claim.Status.Allocation.Devices.Results[0]
		assert.Equal(t, draDriver, r.Driver)
		assert.Equal(t, spare, r.Device, "the new claim is given GPU %d, not the tainted GPU %d", spareDRAGPU, faultyDRAGPU)
	}
	frank, err := node.Admin.ResourceV1().ResourceClaims(draNamespace).Get(t.Context(), draClaim, metav1.GetOptions{})
	require.NoError(t, err)
	if assert.NotNil(t, frank.Status.Allocation) && assert.Len(t, frank.Status.Allocation.Devices.Results, 1) {
		assert.Equal(t, fmt.Sprintf("gpu-%d", draGPU), frank.Status.Allocation.Devices.Results[0].Device, "frank's claim keeps GPU %d", draGPU)
	}

	// Marked resolved: GPUHealthy True, and uncordon_after later the rule deleted, with an Event.
	patchNode(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotationResolved: time.Now().UTC().Format(time.RFC3339)}}})
	waitCondition(t, "GPUHealthy True once the faults are marked resolved", func(c *corev1.NodeCondition) error {
		if c.Status != corev1.ConditionTrue {
			return fmt.Errorf("%s %s: %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	poll.UntilNoError(t, healthWait, "the DeviceTaintRule deleted "+uncordonAfter.String()+" after GPUHealthy is True", func() error {
		list, listErr := rules.List(t.Context(), metav1.ListOptions{})
		if listErr != nil {
			return listErr
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d DeviceTaintRules left: %s", len(list.Items), list.Items[0].Name)
		}
		return nil
	})
	released := waitEvents(t, "GPUDeviceReleased")
	assert.Contains(t, released[0].Message, rule.Name, "the Event names the rule")
	inService(t)
}

// inService: the node neither cordoned nor tainted by the quarantine, nor annotated as its.
func inService(t *testing.T) {
	t.Helper()
	n := getNode(t)
	assert.False(t, n.Spec.Unschedulable, "the node is not cordoned for one GPU")
	assert.Nil(t, ourTaint(n), "the node is not tainted for one GPU: %v", n.Spec.Taints)
	assert.NotContains(t, n.Annotations, annotationQuarantine, "no node quarantine")
}

// conditionNow is the node's GPUHealthy condition, or nil, for a failure's message.
func conditionNow(t *testing.T) *corev1.NodeCondition {
	t.Helper()
	n, err := node.Admin.CoreV1().Nodes().Get(context.WithoutCancel(t.Context()), realnode.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == conditionGPUHealthy {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// withoutTime is a taint without the time the API server sets.
func withoutTime(taint resourcev1alpha3.DeviceTaint) resourcev1alpha3.DeviceTaint {
	taint.TimeAdded = nil
	return taint
}
