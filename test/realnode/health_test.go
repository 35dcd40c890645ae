// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// What the gateway's k8s_gpu_health connector writes on the node (its README).
const (
	conditionGPUHealthy  = "GPUHealthy"
	taintKey             = "otelcol-gpu.io/gpu-unhealthy"
	annotationQuarantine = "otelcol-gpu.io/quarantine"
	annotationReleased   = "otelcol-gpu.io/quarantine-released"
	annotationResolved   = "otelcol-gpu.io/gpu-health-resolved-at"
	healthEventSource    = "otelcol-gpu/k8s_gpu_health"
	// healthWait is how long a check waits for the gateway to act: it goes over every node each
	// interval (30 s), and a new gateway first waits for the Lease (up to 15 s).
	healthWait = 3 * time.Minute
)

// gatewaySA is the gateway's ServiceAccount, as kubectl impersonates it.
const gatewaySA = "system:serviceaccount:" + namespace + ":otelcol-gpu-gateway"

// quarantineOn switches the quarantine on for an installer the way deploy/ documents it (the
// kustomize component, in its dry run; the chart's quarantine values, for real), with a policy
// that also taints for a GPU reset (XID 48's class), so that the taint is seen here. It reports
// whether the switch is a dry run.
var quarantineOn = map[string]func(t *testing.T) (dryRun bool){
	"kustomize base": func(t *testing.T) bool {
		t.Helper()
		dir := filepath.Join(testdata(), "quarantine")
		out, err := node.Kubectl(nil, "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir)
		require.NoError(t, err, out)
		manifests := out
		// The base's uninstall does not know the component's RBAC: it goes here.
		t.Cleanup(func() {
			deleted, deleteErr := node.Kubectl(nil, "delete", "--ignore-not-found", "clusterrolebinding/otelcol-gpu-quarantine", "clusterrole/otelcol-gpu-quarantine")
			assert.NoError(t, deleteErr, deleted)
		})
		out, err = node.Kubectl([]byte(manifests), "apply", "-f", "-")
		require.NoError(t, err, out)
		return true
	},
	"helm": func(t *testing.T) bool {
		t.Helper()
		out, err := helm(t, "upgrade", release, filepath.Join(stack.RepoRoot(), "deploy", "helm", "otelcol-gpu"), "--namespace", namespace,
			"--reuse-values", "--set", "quarantine.enabled=true", "--set", "quarantine.dryRun=false",
			"--values", filepath.Join(testdata(), "quarantine", "values.yaml"))
		require.NoError(t, err, out)
		return false
	},
}

// testGPUHealth: the XID 48 the scenario plays on GPU 1 reaches the gateway from the node's
// agent, and the gateway writes it into Kubernetes with deploy/'s RBAC: the node's GPUHealthy
// False, naming the GPU and the fault, and one Event for it however often it came; nothing else
// (no cordon: the quarantine is off by default). Then the quarantine switched on: in its dry run
// an Event and nothing changed on the node; for real, cordon, taint and annotation, which a
// restarted gateway does not make twice. Marked resolved, the node's GPUHealthy turns True. The
// gateway is stopped and the node given back as it was, for the installers after this one.
func testGPUHealth(t *testing.T, in installer) {
	t.Cleanup(func() { resetGPUHealth(t) })
	uuid := gpus[1].UUID

	// The scenario's XID comes 30 s after the agent starts: once the running agent has reported it,
	// no later one changes what follows.
	poll.UntilNoError(t, waitFor, "the agent to report XID 48 on GPU 1", func() error {
		p, err := scrape(agentMetrics)
		if err != nil {
			return err
		}
		if xid := p.find("gpu_xid_errors_total", labels("xid", "48", "uuid", uuid)); len(xid) != 1 || xid[0].value < 1 {
			return fmt.Errorf("gpu_xid_errors_total %v", xid)
		}
		return nil
	})

	// The condition, naming the fault and the GPU, and the action it calls for (XID 48's class).
	cond := waitCondition(t, "GPUHealthy False for XID 48 on GPU 1", func(c *corev1.NodeCondition) error {
		if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "XID 48") {
			return fmt.Errorf("%s %s: %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	assert.Equal(t, "XIDError", cond.Reason)
	assert.True(t, strings.HasPrefix(cond.Message, "reset_gpu: "), "the recommended action first: %q", cond.Message)
	assert.Contains(t, cond.Message, "GPU 1 ("+uuid, "the GPU by index and UUID")

	// One Event for the XID on GPU 1, however many times the agents sent it (once at each of the
	// agent's starts here), written by the connector.
	xidEvents := waitEvents(t, "XIDError")
	assert.Len(t, xidEvents, 1, "one Event for XID 48 on GPU 1: %v", xidEvents)
	first := xidEvents[0]
	assert.Equal(t, corev1.EventTypeWarning, first.Type)
	assert.Contains(t, first.Message, "XID 48")
	assert.Contains(t, first.Message, uuid)

	// The quarantine is off: nothing done to the node itself, and no permission to.
	n := getNode(t)
	assert.False(t, n.Spec.Unschedulable, "the quarantine is off by default: no cordon")
	assert.Nil(t, ourTaint(n), "no taint")
	assert.NotContains(t, n.Annotations, annotationQuarantine)
	canI(t, false)

	switchOn, ok := quarantineOn[in.name]
	require.True(t, ok, "no quarantine switch for installer %q", in.name)
	dryRun := switchOn(t)
	rolledOut(t, "deployment/otelcol-gpu-gateway")
	canI(t, true)
	if dryRun {
		// The new gateway reads the node's condition back and would quarantine it: it says so in
		// an Event, and changes nothing.
		ev := waitEvents(t, "GPUQuarantineDryRun")
		assert.Contains(t, ev[0].Message, "would have cordoned and tainted "+taintKey+"=reset_gpu:NoSchedule")
		n = getNode(t)
		assert.False(t, n.Spec.Unschedulable, "a dry run cordons nothing")
		assert.Nil(t, ourTaint(n), "a dry run taints nothing")
		assert.NotContains(t, n.Annotations, annotationQuarantine, "a dry run annotates nothing")
		assert.Empty(t, events(t, "GPUQuarantined"), "a dry run quarantines nothing")
	} else {
		n = waitNode(t, "the node cordoned, tainted and annotated", func(n *corev1.Node) error {
			if !n.Spec.Unschedulable || ourTaint(n) == nil || n.Annotations[annotationQuarantine] == "" {
				return fmt.Errorf("unschedulable %t, taints %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
			}
			return nil
		})
		assert.Equal(t, corev1.Taint{Key: taintKey, Value: "reset_gpu", Effect: corev1.TaintEffectNoSchedule}, *ourTaint(n))
		var rec struct {
			By, Reason, Faults, Action string
			At                         time.Time
		}
		require.NoError(t, json.Unmarshal([]byte(n.Annotations[annotationQuarantine]), &rec))
		assert.Contains(t, rec.By, "k8s_gpu_health", "who")
		assert.Equal(t, "XIDError", rec.Reason, "why")
		assert.NotEmpty(t, rec.Faults)
		assert.Contains(t, currentCondition(t).Message, rec.Faults, "the faults, as the condition says them")
		assert.Equal(t, "reset_gpu", rec.Action)
		quarantined := waitEvents(t, "GPUQuarantined")
		xidCount := events(t, "XIDError")[0].Count

		// A gateway restarted reads what is on the node and does nothing twice. Its container is
		// restarted in its pod (SIGTERM: it gives up the Lease): a new pod would find no node to
		// run on, the only one being cordoned.
		restartGateway(t)
		// The new gateway has gone over the node once it reports it quarantined (only the writer
		// reports nodes).
		poll.UntilNoError(t, healthWait, "the restarted gateway to report the node quarantined", func() error {
			p, err := scrape(gatewayMetrics(t))
			if err != nil {
				return err
			}
			if q := p.find("gpu_node_quarantined", labels("node_name", realnode.NodeName, "dry_run", "false")); len(q) != 1 || q[0].value != 1 {
				return fmt.Errorf("gpu_node_quarantined %v", q)
			}
			return nil
		})
		p, err := scrape(gatewayMetrics(t))
		require.NoError(t, err)
		for _, s := range p.find("gpu_quarantine_actions_total", nil) {
			assert.Zero(t, s.value, "the restarted gateway did nothing: %v", s)
		}
		after := getNode(t)
		assert.Equal(t, n.Annotations[annotationQuarantine], after.Annotations[annotationQuarantine], "the quarantine's record, as the first gateway wrote it")
		again := events(t, "GPUQuarantined")
		if assert.Len(t, again, 1) {
			assert.Equal(t, quarantined[0].Count, again[0].Count, "no second quarantine Event")
		}
		assert.Equal(t, xidCount, events(t, "XIDError")[0].Count, "no second count of the XID")
	}

	// A person marks the node's faults resolved (after a GPU reset): True again, and an Event.
	// The running agent's XID came before (the first wait): none comes after this time.
	resolvedAt := time.Now().UTC().Format(time.RFC3339)
	patchNode(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotationResolved: resolvedAt}}})
	cond = waitCondition(t, "GPUHealthy True once the faults are marked resolved", func(c *corev1.NodeCondition) error {
		if c.Status != corev1.ConditionTrue {
			return fmt.Errorf("%s %s: %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	assert.Equal(t, "NoGPUFault", cond.Reason)
	waitEvents(t, "GPUFaultsCleared")
}

// canI: the gateway's ServiceAccount may do what deploy/ grants it, the health writer's few
// writes among them, and patch nodes only with the quarantine.
func canI(t *testing.T, quarantine bool) {
	t.Helper()
	for _, c := range []struct {
		verb, resource, namespace string
		want                      bool
	}{
		{"patch", "nodes --subresource=status", "", true},
		{"create", "events", "default", true},
		{"patch", "events", "default", true},
		{"create", "leases", namespace, true},
		{"get", "leases/otelcol-gpu-health", namespace, true},
		{"update", "leases/otelcol-gpu-health", namespace, true},
		{"list", "nodes", "", true},
		{"watch", "pods", "", true},
		{"patch", "nodes", "", quarantine},
		{"update", "nodes", "", false},
		{"delete", "nodes", "", false},
		{"update", "nodes --subresource=status", "", false},
		{"create", "pods --subresource=eviction", "research", false},
		{"delete", "pods", "research", false},
		{"get", "events", "default", false},
		{"create", "events", namespace, false},
		{"delete", "events", "default", false},
		{"update", "leases/another", namespace, false},
		{"delete", "leases/otelcol-gpu-health", namespace, false},
		{"get", "secrets", namespace, false},
	} {
		args := append([]string{"auth", "can-i", c.verb}, strings.Fields(c.resource)...)
		args = append(args, "--as="+gatewaySA)
		if c.namespace != "" {
			args = append(args, "-n", c.namespace)
		}
		out, _ := node.Kubectl(nil, args...)
		// The answer is the last line (a warning may come before it).
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := map[bool]string{true: "yes", false: "no"}[c.want]
		assert.Equal(t, want, lines[len(lines)-1], "kubectl %s: %s", strings.Join(args, " "), out)
	}
}

// restartGateway restarts the gateway's container in its pod, and waits until it is ready again.
func restartGateway(t *testing.T) {
	t.Helper()
	pods, err := node.Admin.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "one gateway pod")
	pod := pods.Items[0]
	require.Len(t, pod.Status.ContainerStatuses, 1)
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	pid, err := containerPID(namespace + "/" + pod.Name + "/gateway")
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	poll.UntilNoError(t, 2*time.Minute, "the gateway's container restarted and ready", func() error {
		p, err := node.Admin.CoreV1().Pods(namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return errors.New("no container status")
		}
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount <= restarts || !cs.Ready {
			return fmt.Errorf("restarts %d, ready %t", cs.RestartCount, cs.Ready)
		}
		return nil
	})
}

// currentCondition is the node's GPUHealthy condition now.
func currentCondition(t *testing.T) corev1.NodeCondition {
	t.Helper()
	for _, c := range getNode(t).Status.Conditions {
		if c.Type == conditionGPUHealthy {
			return c
		}
	}
	t.Fatalf("no %s condition", conditionGPUHealthy)
	return corev1.NodeCondition{}
}

func getNode(t *testing.T) *corev1.Node {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	n, err := node.Admin.CoreV1().Nodes().Get(ctx, realnode.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func waitNode(t *testing.T, what string, check func(*corev1.Node) error) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	err := poll.For(healthWait, func() error {
		var err error
		if n, err = node.Admin.CoreV1().Nodes().Get(t.Context(), realnode.NodeName, metav1.GetOptions{}); err != nil {
			return err
		}
		return check(n)
	})
	if err != nil {
		logs, _ := node.Kubectl(nil, "logs", "-n", namespace, "deployment/otelcol-gpu-gateway", "--tail=30")
		t.Fatalf("waited %s for %s: %v; the gateway's log:\n%s", healthWait, what, err, logs)
	}
	return n
}

// waitCondition waits for the node's GPUHealthy condition to pass check.
func waitCondition(t *testing.T, what string, check func(*corev1.NodeCondition) error) corev1.NodeCondition {
	t.Helper()
	var cond corev1.NodeCondition
	waitNode(t, what, func(n *corev1.Node) error {
		for _, c := range n.Status.Conditions {
			if c.Type == conditionGPUHealthy {
				cond = c
				return check(&c)
			}
		}
		return fmt.Errorf("no %s condition among %d", conditionGPUHealthy, len(n.Status.Conditions))
	})
	return cond
}

// events are the connector's Events on the node with reason.
func events(t *testing.T, reason string) []corev1.Event {
	t.Helper()
	list, err := node.Admin.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": realnode.NodeName, "reason": reason}.String(),
	})
	require.NoError(t, err)
	var out []corev1.Event
	for i := range list.Items {
		if list.Items[i].Source.Component == healthEventSource {
			out = append(out, list.Items[i])
		}
	}
	return out
}

// waitEvents waits for the connector's Events with reason on the node.
func waitEvents(t *testing.T, reason string) []corev1.Event {
	t.Helper()
	var got []corev1.Event
	err := poll.For(healthWait, func() error {
		if got = events(t, reason); len(got) == 0 {
			return fmt.Errorf("%d %s Events", len(got), reason)
		}
		return nil
	})
	if err != nil {
		logs, _ := node.Kubectl(nil, "logs", "-n", namespace, "deployment/otelcol-gpu-gateway", "--tail=30")
		t.Fatalf("waited %s for the gateway's %s Event on the node: %v; the gateway's log:\n%s", healthWait, reason, err, logs)
	}
	return got
}

func ourTaint(n *corev1.Node) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == taintKey {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

func patchNode(t *testing.T, patch map[string]any, subresources ...string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	data, err := json.Marshal(patch)
	require.NoError(t, err)
	_, err = node.Admin.CoreV1().Nodes().Patch(ctx, realnode.NodeName, types.StrategicMergePatchType, data, metav1.PatchOptions{}, subresources...)
	require.NoError(t, err)
}

// resetGPUHealth gives the node back as it was before the gateway wrote on it: the gateway
// stopped first (it would write again), then no cordon, taint, annotation, condition or Event of
// the connector's.
func resetGPUHealth(t *testing.T) {
	t.Helper()
	// In a Cleanup, where t.Context() is already canceled.
	ctx := context.WithoutCancel(t.Context())
	out, err := node.Kubectl(nil, "scale", "-n", namespace, "deployment/otelcol-gpu-gateway", "--replicas=0")
	require.NoError(t, err, out)
	poll.UntilNoError(t, 2*time.Minute, "the gateway's pods to be gone", func() error {
		pods, listErr := node.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
		if listErr != nil {
			return listErr
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d left", len(pods.Items))
		}
		return nil
	})
	n := getNode(t)
	var taints []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if taint.Key != taintKey {
			taints = append(taints, taint)
		}
	}
	if _, ok := n.Annotations[annotationQuarantine]; ok || ourTaint(n) != nil || n.Spec.Unschedulable {
		n.Spec.Unschedulable = false
		n.Spec.Taints = taints
		delete(n.Annotations, annotationQuarantine)
		_, err = node.Admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	patchNode(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		annotationQuarantine: nil, annotationReleased: nil, annotationResolved: nil,
	}}})
	patchNode(t, map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": conditionGPUHealthy, "$patch": "delete"},
	}}}, "status")
	err = node.Admin.CoreV1().Events("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": realnode.NodeName, "source": healthEventSource}.String(),
	})
	require.NoError(t, err)
	n = getNode(t)
	assert.False(t, n.Spec.Unschedulable)
	assert.Nil(t, ourTaint(n))
	for _, c := range n.Status.Conditions {
		assert.NotEqual(t, conditionGPUHealthy, string(c.Type), "the condition removed")
	}
}
