// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8sgpuhealthconnector

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
)

// quarantineOn is the policy of the tests: quarantine enabled and acting, uncordon after ten
// minutes healthy.
func quarantineOn(cfg *Config) {
	cfg.Quarantine.Enabled = true
	cfg.Quarantine.DryRun = false
	cfg.Quarantine.UncordonAfter = 10 * time.Minute
}

func getNode(t *testing.T, admin kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// changeNode reads a node, changes it and writes it back, as a person with kubectl would.
func changeNode(t *testing.T, admin kubernetes.Interface, name string, change func(*corev1.Node)) {
	t.Helper()
	poll.UntilNoError(t, eventually, "a write of "+name, func() error {
		n := getNode(t, admin, name)
		change(n)
		_, err := admin.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
}

func reboot(t *testing.T, admin kubernetes.Interface, name, bootID string) {
	t.Helper()
	n := getNode(t, admin, name)
	n.Status.NodeInfo.BootID = bootID
	_, err := admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// waitNode waits until check finds nothing wrong with the node, and returns it.
func waitNode(t *testing.T, admin kubernetes.Interface, name, what string, check func(*corev1.Node) error) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	poll.UntilNoError(t, eventually, name+" "+what, func() error {
		n = getNode(t, admin, name)
		return check(n)
	})
	return n
}

func quarantined(n *corev1.Node) error {
	if !n.Spec.Unschedulable || n.Annotations[AnnotationQuarantine] == "" {
		return fmt.Errorf("unschedulable %t, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	return nil
}

func ourTaint(n *corev1.Node) *corev1.Taint {
	i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintKey })
	if i < 0 {
		return nil
	}
	return &n.Spec.Taints[i]
}

func record(t *testing.T, n *corev1.Node) quarantineRecord {
	t.Helper()
	var r quarantineRecord
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[AnnotationQuarantine]), &r))
	return r
}

func released(t *testing.T, n *corev1.Node) releaseRecord {
	t.Helper()
	var r releaseRecord
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[AnnotationReleased]), &r))
	return r
}

// logRecords are the writer's log records of event so far, as "attr=value,..." lines.
func (tw *testWriter) logRecords(event string) []string {
	var out []string
	for _, ld := range tw.logsOut.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					if lr.EventName() != event {
						continue
					}
					var kv []string
					for k, v := range lr.Attributes().All() {
						kv = append(kv, k+"="+v.AsString())
					}
					slices.Sort(kv)
					out = append(out, strings.Join(kv, ","))
				}
			}
		}
	}
	return out
}

// metricsNow ticks the writer and returns its next metrics.
func (tw *testWriter) metricsNow(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	tw.out.Reset()
	tw.tick()
	poll.Until(t, eventually, "the writer's metrics", func() bool { return len(tw.out.AllMetrics()) > 0 })
	md := tw.out.AllMetrics()[0]
	out := map[string]map[string]int64{}
	for _, name := range []string{"gpu_node_quarantined", "gpu_quarantine_actions_total", "gpu_quarantine_breaker_open", "gpu_quarantine_recent_nodes"} {
		out[name] = points(md, name)
		for k, v := range out[name] {
			if v == 0 && strings.HasPrefix(k, "outcome=") || v == 0 && strings.Contains(k, "quarantine_action=") {
				delete(out[name], k) // the counts that stayed at 0
			}
		}
	}
	return out
}

// TestQuarantine runs the policy on the real API server: a fault that calls for a reboot
// cordons, taints and annotates its node, a reset only cordons it, a node someone else cordoned
// is left as it is, a node healthy for uncordon_after is returned to service, the same class of
// fault coming back escalates, a node a person returns to service stays until a new fault, and
// a writer restarted mid-way reads all of it back and does nothing twice.
func TestQuarantine(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	policy := func(cfg *Config) {
		quarantineOn(cfg)
		cfg.Quarantine.Breaker.MaxShare = 1 // the breaker has its own test
	}
	tw := startWriter(t, c, clk, policy)
	tw.waitLeading()
	for _, n := range []string{"q-reboot", "q-reset", "q-person"} {
		createGPUNode(t, admin, n)
		tw.send(gpuOn(n, 0).healthy(clk.Now()))
		waitCondition(t, admin, n, corev1.ConditionTrue, reasonHealthy)
	}

	t.Run("cordon, taint and annotation", func(t *testing.T) {
		clk.Advance(time.Second)
		tw.sendLogs(gpuOn("q-reboot", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
		n := waitNode(t, admin, "q-reboot", "quarantined", quarantined)
		require.NotNil(t, ourTaint(n))
		assert.Equal(t, corev1.Taint{Key: TaintKey, Value: "reboot", Effect: corev1.TaintEffectNoSchedule}, *ourTaint(n))
		r := record(t, n)
		assert.Equal(t, quarantineRecord{
			By: "otelcol-gpu k8s_gpu_health (" + tw.w.identity + ")", At: clk.Now().UTC(),
			Reason: "XIDError", Faults: "GPU 0 (GPU-q-reboot-0): XID 79, meaning of 79",
			Class: ActionReboot, Action: ActionReboot, Severity: xid.SeverityFatal, Tainted: true,
		}, r)
		ev := waitEvent(t, admin, "q-reboot", reasonQuarantined, 1, nil)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Message, "cordoned and tainted otelcol-gpu.io/gpu-unhealthy=reboot:NoSchedule for XIDError: reboot (fatal)")
		assert.Contains(t, tw.logRecords(eventQuarantine), "action=reboot,node_name=q-reboot,outcome=applied,quarantine_action=cordon,severity=fatal")
	})

	t.Run("a reset only cordons", func(t *testing.T) {
		clk.Advance(time.Second)
		tw.send(gpuOn("q-reset", 0).health(clk.Now(), map[string]int64{"memory_ecc": 1}))
		n := waitNode(t, admin, "q-reset", "quarantined", quarantined)
		assert.Nil(t, ourTaint(n), "a reset takes the GPU, not the node: no taint for a drainer")
		assert.False(t, record(t, n).Tainted)
	})

	t.Run("a person's cordon is left as it is", func(t *testing.T) {
		maintenance := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}
		changeNode(t, admin, "q-person", func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Spec.Taints = []corev1.Taint{maintenance}
		})
		before := getNode(t, admin, "q-person")
		clk.Advance(time.Second)
		tw.sendLogs(gpuOn("q-person", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
		waitEvent(t, admin, "q-person", reasonSkipped, 1, nil)
		tw.tick()
		tw.tick()
		after := getNode(t, admin, "q-person")
		assert.Equal(t, before.Spec, after.Spec, "cordon and taints as the person left them")
		assert.Empty(t, after.Annotations[AnnotationQuarantine])
		assert.Equal(t, int32(1), waitEvent(t, admin, "q-person", reasonSkipped, 1, nil).Count, "reported once")
		assert.Contains(t, tw.logRecords(eventQuarantine), "action=reboot,node_name=q-person,outcome=person_cordoned,quarantine_action=cordon,severity=fatal")
	})

	t.Run("uncordon after the healthy period", func(t *testing.T) {
		reboot(t, admin, "q-reboot", "boot-2")
		waitCondition(t, admin, "q-reboot", corev1.ConditionTrue, reasonHealthy)
		clk.Advance(5 * time.Minute)
		tw.tick()
		tw.tick()
		require.NoError(t, quarantined(getNode(t, admin, "q-reboot")), "healthy for 5 of uncordon_after's 10 minutes")
		clk.Advance(5 * time.Minute)
		n := waitNode(t, admin, "q-reboot", "returned to service", func(n *corev1.Node) error {
			if n.Spec.Unschedulable || ourTaint(n) != nil || n.Annotations[AnnotationQuarantine] != "" {
				tw.tick()
				return fmt.Errorf("unschedulable %t, taints %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
			}
			return nil
		})
		rel := released(t, n)
		assert.Equal(t, "otelcol-gpu k8s_gpu_health ("+tw.w.identity+")", rel.By)
		assert.Equal(t, ActionReboot, rel.Class)
		ev := waitEvent(t, admin, "q-reboot", reasonReleased, 1, nil)
		assert.Contains(t, ev.Message, "uncordoned: GPUHealthy has been True for 10m0s")
		assert.Contains(t, tw.logRecords(eventQuarantine), "action=reboot,node_name=q-reboot,outcome=applied,quarantine_action=uncordon,severity=fatal")
	})

	t.Run("escalation", func(t *testing.T) {
		// The node was returned to service after a reboot-class XID; another one within the
		// escalation window calls for more than a reboot.
		clk.Advance(time.Hour)
		tw.sendLogs(gpuOn("q-reboot", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
		n := waitNode(t, admin, "q-reboot", "quarantined again", quarantined)
		assert.Equal(t, ActionInspectHardware, record(t, n).Action)
		assert.Equal(t, ActionReboot, record(t, n).Class)
		require.NotNil(t, ourTaint(n))
		assert.Equal(t, "inspect_hardware", ourTaint(n).Value)
		cond := condition(n)
		assert.True(t, strings.HasPrefix(cond.Message, "inspect_hardware: "), cond.Message)
		assert.Contains(t, cond.Message, "(escalated from reboot: that class of fault came back soon after the node was returned to service)")
	})

	t.Run("a person returns a node to service", func(t *testing.T) {
		changeNode(t, admin, "q-reset", func(n *corev1.Node) { n.Spec.Unschedulable = false })
		n := waitNode(t, admin, "q-reset", "released by the person", func(n *corev1.Node) error {
			if n.Annotations[AnnotationQuarantine] != "" || n.Annotations[AnnotationReleased] == "" {
				tw.tick()
				return fmt.Errorf("annotations %v", n.Annotations)
			}
			return nil
		})
		assert.Equal(t, byPerson, released(t, n).By)
		assert.False(t, n.Spec.Unschedulable)
		waitEvent(t, admin, "q-reset", reasonReturned, 1, nil)
		tw.tick()
		tw.tick()
		assert.False(t, getNode(t, admin, "q-reset").Spec.Unschedulable, "the same faults: the person's call stands")

		// A fault that begins after it: quarantined again, escalated (the same class came back
		// after the node returned to service), and so tainted.
		clk.Advance(time.Second)
		tw.sendLogs(gpuOn("q-reset", 0).xids(clk.Now(), 48, "reset_gpu", "fatal", 1))
		n = waitNode(t, admin, "q-reset", "quarantined after a new fault", quarantined)
		assert.Equal(t, ActionReboot, record(t, n).Action)
		require.NotNil(t, ourTaint(n))
	})

	t.Run("a writer restarted mid-way does nothing twice", func(t *testing.T) {
		before := map[string]*corev1.Node{}
		for _, name := range []string{"q-reboot", "q-reset", "q-person"} {
			before[name] = getNode(t, admin, name)
		}
		quarantines := waitEvent(t, admin, "q-reboot", reasonQuarantined, 2, nil).Count
		tw.stop()

		second := startWriter(t, c, clk, policy)
		second.waitLeading()
		clk.Advance(time.Second)
		for _, name := range []string{"q-reboot", "q-reset", "q-person"} {
			second.send(gpuOn(name, 0).healthy(clk.Now()))
		}
		second.tick()
		second.tick()
		m := second.metricsNow(t)
		assert.Empty(t, m["gpu_quarantine_actions_total"], "no action")
		assert.Equal(t, map[string]int64{
			"action=inspect_hardware,dry_run=false,node_name=q-reboot": 1,
			"action=reboot,dry_run=false,node_name=q-reset":            1,
		}, m["gpu_node_quarantined"], "its quarantines, read from the nodes")
		for name, b := range before {
			n := getNode(t, admin, name)
			assert.Equal(t, b.Spec, n.Spec, name)
			assert.Equal(t, b.Annotations, n.Annotations, name)
		}
		assert.Equal(t, quarantines, waitEvent(t, admin, "q-reboot", reasonQuarantined, quarantines, nil).Count)
	})
}

// TestQuarantineBreaker: under a burst of faults across many nodes the circuit breaker trips at
// its threshold (10 % of 30 GPU nodes: 3) and nothing more is cordoned; the trip is a log
// record, an Event and a metric; once the window has passed, it closes and quarantines again.
func TestQuarantineBreaker(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, quarantineOn)
	tw.waitLeading()
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("b-%02d", i))
		createGPUNode(t, admin, names[i])
	}
	// A node without GPUs is not a GPU node: it does not raise the limit.
	_, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	poll.Until(t, eventually, "the writer to list the nodes", func() bool { return len(tw.w.nodes.GetStore().List()) == 31 })

	cordoned := func() []string {
		var out []string
		for _, name := range names {
			if getNode(t, admin, name).Spec.Unschedulable {
				out = append(out, name)
			}
		}
		return out
	}
	burst := names[:10]
	for _, name := range burst {
		tw.sendLogs(gpuOn(name, 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
	}
	for _, name := range burst[3:] {
		waitEvent(t, admin, name, reasonRefused, 1, nil)
	}
	assert.Equal(t, burst[:3], cordoned())
	for range 3 {
		tw.tick()
	}
	assert.Equal(t, burst[:3], cordoned(), "nothing more")
	tripped := waitEvent(t, admin, "b-03", reasonTripped, 1, nil)
	assert.Contains(t, tripped.Message, "the quarantine's circuit breaker tripped: 3 of 30 GPU nodes quarantined within 1h0m0s")
	assert.Equal(t, []string{"breaker_state=open,gpu_nodes=30,recent_nodes=3"}, tw.logRecords(eventBreaker))
	m := tw.metricsNow(t)
	assert.Equal(t, map[string]int64{"": 1}, m["gpu_quarantine_breaker_open"])
	assert.Equal(t, map[string]int64{"": 3}, m["gpu_quarantine_recent_nodes"])
	assert.Equal(t, map[string]int64{
		"outcome=applied,quarantine_action=cordon":      3,
		"outcome=breaker_open,quarantine_action=cordon": 7,
	}, m["gpu_quarantine_actions_total"])

	// The window passes: the breaker closes, quarantines three more, and trips again.
	clk.Advance(time.Hour + time.Second)
	poll.Until(t, eventually, "three more quarantines", func() bool {
		tw.tick()
		return len(cordoned()) == 6
	})
	assert.Equal(t, burst[:6], cordoned())
	poll.Until(t, eventually, "the breaker to open again", func() bool {
		return slices.Equal(tw.logRecords(eventBreaker), []string{
			"breaker_state=open,gpu_nodes=30,recent_nodes=3",
			"breaker_state=closed,gpu_nodes=30,recent_nodes=0",
			"breaker_state=open,gpu_nodes=30,recent_nodes=3",
		})
	})
}

// TestQuarantineDryRun: in dry run (the default when enabled) the quarantine logs, counts and
// makes Events of what it would do, and changes nothing on the node.
func TestQuarantineDryRun(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, func(cfg *Config) {
		cfg.Quarantine.Enabled = true
		cfg.Quarantine.UncordonAfter = 10 * time.Minute
	})
	require.True(t, tw.w.cfg.Quarantine.DryRun, "dry run unless said otherwise")
	tw.waitLeading()
	createGPUNode(t, admin, "d-1")
	for i := range 9 { // the breaker's share of 10 GPU nodes allows one
		createGPUNode(t, admin, fmt.Sprintf("d-filler-%d", i))
	}
	before := getNode(t, admin, "d-1")

	tw.sendLogs(gpuOn("d-1", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
	ev := waitEvent(t, admin, "d-1", reasonDryRun, 1, nil)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Contains(t, ev.Message, "dry run: would have cordoned and tainted otelcol-gpu.io/gpu-unhealthy=reboot:NoSchedule for XIDError: reboot (fatal); nothing was changed")
	m := tw.metricsNow(t)
	assert.Equal(t, map[string]int64{"action=reboot,dry_run=true,node_name=d-1": 1}, m["gpu_node_quarantined"])
	assert.Equal(t, map[string]int64{"outcome=dry_run,quarantine_action=cordon": 1}, m["gpu_quarantine_actions_total"])
	assert.Contains(t, tw.logRecords(eventQuarantine), "action=reboot,node_name=d-1,outcome=dry_run,quarantine_action=cordon,severity=fatal")

	reboot(t, admin, "d-1", "boot-2")
	waitCondition(t, admin, "d-1", corev1.ConditionTrue, reasonHealthy)
	clk.Advance(11 * time.Minute)
	poll.Until(t, eventually, "the dry run's uncordon", func() bool {
		tw.tick()
		return slices.Contains(tw.logRecords(eventQuarantine), "action=reboot,node_name=d-1,outcome=dry_run,quarantine_action=uncordon,severity=fatal")
	})
	waitEvent(t, admin, "d-1", reasonDryRun, 2, nil)

	after := getNode(t, admin, "d-1")
	assert.Equal(t, before.Spec, after.Spec, "no cordon, no taint")
	assert.NotContains(t, after.Annotations, AnnotationQuarantine)
	assert.NotContains(t, after.Annotations, AnnotationReleased)
}

// TestQuarantineWithoutItsPermission: without deploy/components/quarantine's patch on nodes (the
// base's RBAC alone), an enabled quarantine changes nothing, and says so: a failed action, an
// Event, the writer's errors.
func TestQuarantineWithoutItsPermission(t *testing.T) {
	c := kube.Start(t, "writer")
	c.GrantManifests("writer", namespace, deployRBAC[:2]...)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, func(cfg *Config) {
		quarantineOn(cfg)
		cfg.Quarantine.Breaker.MaxShare = 1
	})
	tw.waitLeading()
	createGPUNode(t, admin, "f-1")
	tw.sendLogs(gpuOn("f-1", 0).xids(clk.Now(), 79, "reboot", "fatal", 1))
	ev := waitEvent(t, admin, "f-1", reasonFailed, 1, nil)
	assert.Contains(t, ev.Message, "could not be cordoned and tainted otelcol-gpu.io/gpu-unhealthy=reboot:NoSchedule for XIDError: reboot (fatal)")
	assert.Contains(t, ev.Message, "forbidden")
	assert.False(t, getNode(t, admin, "f-1").Spec.Unschedulable)
	m := tw.metricsNow(t)
	assert.Positive(t, m["gpu_quarantine_actions_total"]["outcome=failed,quarantine_action=cordon"])
	assert.Positive(t, points(tw.out.AllMetrics()[0], "gpu_health_writer_errors_total")["operation=node"])
}
