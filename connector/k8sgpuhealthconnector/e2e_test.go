// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8sgpuhealthconnector

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
)

// eventually bounds a wait for the writer or the API server; nothing is asserted about how long
// it took.
const eventually = 60 * time.Second

// namespace is the writers' own, where their Lease is (deploy/'s).
const namespace = "otelcol-gpu"

// deployRBAC are the files of deploy/ that give the gateway's service account its permissions,
// with the quarantine component: the tests' writers run with exactly those
// (kube.GrantManifests), bound to the user "writer".
var deployRBAC = []string{
	filepath.Join("..", "..", "deploy", "base", "rbac.yaml"),
	filepath.Join("..", "..", "deploy", "base", "health-rbac.yaml"),
	filepath.Join("..", "..", "deploy", "components", "quarantine", "rbac.yaml"),
}

func startCluster(t *testing.T) *kube.Cluster {
	c := kube.Start(t, "writer")
	c.GrantManifests("writer", namespace, deployRBAC...)
	return c
}

// testWriter is a writer as the collector runs one: its factory's connectors (metrics and logs
// in, metrics and log records out) sharing it, on a fake clock that the test moves.
type testWriter struct {
	t       *testing.T
	metrics connector.Metrics
	logs    connector.Logs
	// records is the connector that sends the log records; it reads metrics too.
	records connector.Metrics
	w       *writer
	clk     *clock.Fake
	out     *consumertest.MetricsSink
	logsOut *consumertest.LogsSink
	stopped bool
}

func startWriter(t *testing.T, c *kube.Cluster, clk *clock.Fake, change func(*Config)) *testWriter {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthTypeKubeConfig
	cfg.KubeConfigPath = c.Kubeconfig("writer")
	cfg.SyncTimeout = eventually
	// Short terms, so that a second writer takes over soon after the first stops.
	cfg.LeaderElection = LeaderElectionConfig{
		LeaseName: "otelcol-gpu-health", LeaseNamespace: namespace,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
	if change != nil {
		change(cfg)
	}
	f := NewFactory()
	set := connectortest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t)
	tw := &testWriter{t: t, clk: clk, out: new(consumertest.MetricsSink), logsOut: new(consumertest.LogsSink)}
	var err error
	tw.metrics, err = f.CreateMetricsToMetrics(t.Context(), set, cfg, tw.out)
	require.NoError(t, err)
	tw.logs, err = f.CreateLogsToMetrics(t.Context(), set, cfg, tw.out)
	require.NoError(t, err)
	tw.records, err = f.CreateMetricsToLogs(t.Context(), set, cfg, tw.logsOut)
	require.NoError(t, err)
	tw.w = tw.metrics.(metricsInput).w
	require.Same(t, tw.w, tw.logs.(logsInput).w, "one writer behind the connectors")
	require.Same(t, tw.w, tw.records.(metricsInput).w, "one writer behind the connectors")
	tw.w.setClock(clk)
	for _, c := range []component.Component{tw.metrics, tw.logs, tw.records} {
		require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
	}
	t.Cleanup(tw.stop)
	return tw
}

// stop shuts the writer down, as a collector does on SIGTERM: it gives its Lease up.
func (tw *testWriter) stop() {
	if tw.stopped {
		return
	}
	tw.stopped = true
	for _, c := range []component.Component{tw.metrics, tw.logs, tw.records} {
		require.NoError(tw.t, c.Shutdown(context.Background()))
	}
}

func (tw *testWriter) waitLeading() {
	tw.t.Helper()
	poll.Until(tw.t, eventually, "the writer to hold the Lease", func() bool { return tw.w.leading() != nil })
}

func (tw *testWriter) send(md pmetric.Metrics) {
	tw.t.Helper()
	require.NoError(tw.t, tw.metrics.ConsumeMetrics(context.Background(), md))
}

func (tw *testWriter) sendLogs(ld plog.Logs) {
	tw.t.Helper()
	require.NoError(tw.t, tw.logs.ConsumeLogs(context.Background(), ld))
}

// tick moves the clock by an interval: the writer goes over every node, brings Event counts up
// to date and sends its metrics.
func (tw *testWriter) tick() { tw.clk.Advance(tw.w.cfg.Interval) }

// createGPUNode creates a node with 8 GPUs and writes its status as a kubelet would, its boot
// boot-1.
func createGPUNode(t *testing.T, admin kubernetes.Interface, name string) {
	t.Helper()
	ctx := t.Context()
	created, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = corev1.NodeStatus{
		NodeInfo:   corev1.NodeSystemInfo{BootID: "boot-1"},
		Capacity:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}},
	}
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func nodeCondition(t *testing.T, admin kubernetes.Interface, name string) *corev1.NodeCondition {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return condition(n)
}

// waitCondition waits for the node's GPUHealthy to have status and reason, and returns it.
func waitCondition(t *testing.T, admin kubernetes.Interface, name string, status corev1.ConditionStatus, reason string) *corev1.NodeCondition {
	t.Helper()
	var c *corev1.NodeCondition
	poll.UntilNoError(t, eventually, fmt.Sprintf("%s's %s to be %s (%s)", name, ConditionType, status, reason), func() error {
		c = nodeCondition(t, admin, name)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("it is %+v", c)
		}
		return nil
	})
	return c
}

// nodeEvents are the node's Events, by reason.
func nodeEvents(t *testing.T, admin kubernetes.Interface, name string) map[string][]corev1.Event {
	t.Helper()
	list, err := admin.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": name}.String(),
	})
	require.NoError(t, err)
	out := map[string][]corev1.Event{}
	for i := range list.Items {
		out[list.Items[i].Reason] = append(out[list.Items[i].Reason], list.Items[i])
	}
	return out
}

// waitEvent waits for the node's one Event of reason to have count, and returns it.
func waitEvent(t *testing.T, admin kubernetes.Interface, node, reason string, count int32, tick func()) corev1.Event {
	t.Helper()
	var ev corev1.Event
	poll.UntilNoError(t, eventually, fmt.Sprintf("%s's %s Event to count %d", node, reason, count), func() error {
		events := nodeEvents(t, admin, node)[reason]
		if len(events) != 1 || events[0].Count != count {
			if tick != nil {
				tick()
			}
			return fmt.Errorf("the %s Events are %+v", reason, events)
		}
		ev = events[0]
		return nil
	})
	return ev
}

// conditionChanges records every change of the node's GPUHealthy that the API server sends
// to a watch, from now on, as "status reason".
func conditionChanges(t *testing.T, admin kubernetes.Interface, name string) func() []string {
	t.Helper()
	w, err := admin.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var changes []string
	go func() {
		last := ""
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			if c := condition(n); c != nil && string(c.Status)+" "+c.Reason != last {
				last = string(c.Status) + " " + c.Reason
				mu.Lock()
				changes = append(changes, last)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(changes)
	}
}

func newClock() *clock.Fake { return clock.NewFake(time.Now().Truncate(time.Second)) }

// A storm of one XID on one GPU: 5,000 records in 20 batches.
const stormBatches, stormBatch = 20, 250

// TestConditionsAndEvents: a GPU node's condition is True while its GPUs are healthy, turns
// False on a fault that calls for action with an Event naming the GPU, the fault and the
// action, and True again when the fault clears, with an Event; the node's other conditions are
// left as they are. A storm of one XID on one GPU is one transition and one Event with its
// count.
func TestConditionsAndEvents(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, nil)
	tw.waitLeading()

	createGPUNode(t, admin, "gpu-a")
	g := gpuOn("gpu-a", 3)
	changes := conditionChanges(t, admin, "gpu-a")
	tw.send(g.healthy(clk.Now()))
	healthy := waitCondition(t, admin, "gpu-a", corev1.ConditionTrue, reasonHealthy)
	assert.Equal(t, messageHealthy, healthy.Message)

	t.Run("fault", func(t *testing.T) {
		clk.Advance(time.Second) // the next collection
		tw.send(g.health(clk.Now(), map[string]int64{"nvml": 2}))
		cond := waitCondition(t, admin, "gpu-a", corev1.ConditionFalse, "GPULost")
		assert.Equal(t, fmt.Sprintf("reboot: %s. GPU 3 (%s): lost: NVML reports the GPU lost or needing a reset", ActionReboot.words(), g.uuid), cond.Message)
		ev := waitEvent(t, admin, "gpu-a", "GPULost", 1, nil)
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Equal(t, eventNamespace, ev.Namespace)
		assert.Contains(t, ev.Message, "GPU 3 ("+g.uuid+"): lost: NVML reports the GPU lost or needing a reset")
		assert.Contains(t, ev.Message, "Recommended action: reboot: "+ActionReboot.words())
		node, err := admin.CoreV1().Nodes().Get(t.Context(), "gpu-a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, node.UID, ev.InvolvedObject.UID, "kubectl describe node finds Events by the node's UID")
		assert.Equal(t, "otelcol-gpu/k8s_gpu_health", ev.Source.Component)
		require.Len(t, node.Status.Conditions, 2)
		ready := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		require.GreaterOrEqual(t, ready, 0, "the kubelet's condition is left as it was")
		assert.Equal(t, "KubeletReady", node.Status.Conditions[ready].Reason)
	})

	t.Run("storm", func(t *testing.T) {
		before := nodeCondition(t, admin, "gpu-a")
		for i := range stormBatches {
			tw.sendLogs(g.xids(clk.Now().Add(time.Duration(i)*time.Millisecond), 79, "reboot", "fatal", stormBatch))
		}
		cond := waitCondition(t, admin, "gpu-a", corev1.ConditionFalse, "XIDError")
		assert.Equal(t, before.LastTransitionTime, cond.LastTransitionTime, "still False: no transition")
		assert.Contains(t, cond.Message, ". GPU 3 ("+g.uuid+"): XID 79, meaning of 79; ")
		assert.Contains(t, cond.Message, "; GPU 3 ("+g.uuid+"): lost:")
		ev := waitEvent(t, admin, "gpu-a", "XIDError", stormBatches*stormBatch, tw.tick)
		assert.Contains(t, ev.Message, "XID 79, meaning of 79")
		assert.Len(t, nodeEvents(t, admin, "gpu-a")["XIDError"], 1, "one Event")
	})

	t.Run("cleared", func(t *testing.T) {
		// The lost GPU answers again; the XID stays until the node reboots.
		clk.Advance(time.Second)
		tw.send(g.healthy(clk.Now()))
		poll.Until(t, eventually, "the lost GPU to leave the message", func() bool {
			return !strings.Contains(nodeCondition(t, admin, "gpu-a").Message, "lost")
		})
		assert.Equal(t, corev1.ConditionFalse, nodeCondition(t, admin, "gpu-a").Status)
		n, err := admin.CoreV1().Nodes().Get(t.Context(), "gpu-a", metav1.GetOptions{})
		require.NoError(t, err)
		n.Status.NodeInfo.BootID = "boot-2"
		_, err = admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitCondition(t, admin, "gpu-a", corev1.ConditionTrue, reasonHealthy)
		ev := waitEvent(t, admin, "gpu-a", reasonCleared, 1, nil)
		assert.Equal(t, corev1.EventTypeNormal, ev.Type)
		assert.Contains(t, ev.Message, "GPUHealthy is True again")
	})

	assert.Equal(t, []string{"True NoGPUFault", "False GPULost", "False XIDError", "True NoGPUFault"}, changes(),
		"one transition to False, none in the storm, one back")

	t.Run("resolved by a person", func(t *testing.T) {
		clk.Advance(time.Second)
		tw.send(g.health(clk.Now(), map[string]int64{"row_remap": 2}))
		waitCondition(t, admin, "gpu-a", corev1.ConditionFalse, "RowRemapFailed")
		// The GPU was replaced without a reboot; the person marks the node's faults resolved.
		clk.Advance(time.Minute)
		n, err := admin.CoreV1().Nodes().Get(t.Context(), "gpu-a", metav1.GetOptions{})
		require.NoError(t, err)
		n.Annotations = map[string]string{AnnotationResolved: clk.Now().UTC().Format(time.RFC3339)}
		_, err = admin.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitCondition(t, admin, "gpu-a", corev1.ConditionTrue, reasonHealthy)
	})

	t.Run("metrics", func(t *testing.T) {
		clk.Advance(time.Second)
		tw.send(g.health(clk.Now(), map[string]int64{"memory_ecc": 1}))
		waitCondition(t, admin, "gpu-a", corev1.ConditionFalse, "DoubleBitECCError")
		tw.out.Reset()
		tw.tick()
		poll.Until(t, eventually, "the writer's metrics", func() bool { return len(tw.out.AllMetrics()) > 0 })
		md := tw.out.AllMetrics()[0]
		assert.Equal(t, map[string]int64{"": 1}, points(md, "gpu_health_writer_leader"))
		assert.Equal(t, map[string]int64{"action=reset_gpu,fault=double_bit_ecc,node_name=gpu-a,severity=warning": 1}, points(md, "gpu_node_unhealthy"))
		assert.Equal(t, map[string]int64{
			"fault=gpu_lost,node_name=gpu-a,replayed=false":         1,
			"fault=xid,node_name=gpu-a,replayed=false":              stormBatches * stormBatch,
			"fault=row_remap_failed,node_name=gpu-a,replayed=false": 1,
			"fault=double_bit_ecc,node_name=gpu-a,replayed=false":   1,
		}, points(md, "gpu_node_faults_total"))
		assert.Equal(t, map[string]int64{"operation=condition": 0, "operation=event": 0}, points(md, "gpu_health_writer_errors_total"))
	})
}

// TestReplayedBacklog: hours of an edge agent's backlog, sent after an outage, inform (an Event
// per XID) and change no condition.
func TestReplayedBacklog(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	tw := startWriter(t, c, clk, nil)
	tw.waitLeading()
	createGPUNode(t, admin, "edge-1")
	g := gpuOn("edge-1", 0)
	tw.send(g.healthy(clk.Now()))
	waitCondition(t, admin, "edge-1", corev1.ConditionTrue, reasonHealthy)

	// Two hours of collections (a minute apart) that waited in the agent's queue for an hour.
	hoursAgo := clk.Now().Add(-3 * time.Hour)
	for i := range 120 {
		at := hoursAgo.Add(time.Duration(i) * time.Minute)
		tw.send(g.health(at, map[string]int64{"nvml": 2}))
		tw.sendLogs(g.xids(at, 79, "reboot", "fatal", 1))
	}
	ev := waitEvent(t, admin, "edge-1", reasonReplayed, 120, tw.tick)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Contains(t, ev.Message, "reported more than max_data_age (10m0s) later")
	assert.Equal(t, hoursAgo.Unix(), ev.FirstTimestamp.Unix(), "the Event tells when it happened")
	tw.tick()
	cond := nodeCondition(t, admin, "edge-1")
	assert.Equal(t, corev1.ConditionTrue, cond.Status, "nothing raised for the past")
	assert.Empty(t, nodeEvents(t, admin, "edge-1")["XIDError"])

	// The backlog done, the agent's fresh data says the GPU is lost now: that is acted upon.
	tw.send(g.health(clk.Now(), map[string]int64{"nvml": 2}))
	waitCondition(t, admin, "edge-1", corev1.ConditionFalse, "GPULost")
}

// TestRestartRereadsState: a writer restarted mid-way (a new gateway pod) reads what the one
// before wrote back from the API server, with no state of its own: the faults it finds already
// written get no second transition or Event, an XID that no agent will send again stays until
// the node reboots, and what is new is written.
func TestRestartRereadsState(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	first := startWriter(t, c, clk, nil)
	first.waitLeading()
	createGPUNode(t, admin, "gpu-r")
	createGPUNode(t, admin, "gpu-s")
	g, h := gpuOn("gpu-r", 1), gpuOn("gpu-s", 0)
	first.send(g.health(clk.Now(), map[string]int64{"nvml": 2}))
	first.sendLogs(h.xids(clk.Now(), 74, "check_nvlink", "fatal", 1))
	before := waitCondition(t, admin, "gpu-r", corev1.ConditionFalse, "GPULost")
	waitCondition(t, admin, "gpu-s", corev1.ConditionFalse, "XIDError")
	waitEvent(t, admin, "gpu-r", "GPULost", 1, nil)
	waitEvent(t, admin, "gpu-s", "XIDError", 1, nil)
	first.stop()

	changes := conditionChanges(t, admin, "gpu-r")
	clk.Advance(time.Minute)
	second := startWriter(t, c, clk, nil)
	second.waitLeading()
	lease, err := admin.CoordinationV1().Leases(namespace).Get(t.Context(), "otelcol-gpu-health", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, second.w.identity, *lease.Spec.HolderIdentity)
	// The agents send on: the same lost GPU, the other node's GPUs healthy.
	second.send(g.health(clk.Now(), map[string]int64{"nvml": 2}))
	second.send(h.healthy(clk.Now()))
	second.tick()
	second.tick()
	after := waitCondition(t, admin, "gpu-r", corev1.ConditionFalse, "GPULost")
	assert.Equal(t, before.LastTransitionTime, after.LastTransitionTime)
	assert.Equal(t, before.Message, after.Message)
	assert.Equal(t, int32(1), waitEvent(t, admin, "gpu-r", "GPULost", 1, nil).Count, "not announced twice")
	waitCondition(t, admin, "gpu-s", corev1.ConditionFalse, "XIDError")
	assert.Equal(t, int32(1), waitEvent(t, admin, "gpu-s", "XIDError", 1, nil).Count)
	assert.Empty(t, changes(), "nothing written again")

	// New after the restart: written, and counted on in the Event the first writer made.
	second.send(g.health(clk.Now().Add(time.Second), map[string]int64{"nvml": 0}))
	waitCondition(t, admin, "gpu-r", corev1.ConditionTrue, reasonHealthy)
	second.send(g.health(clk.Now().Add(2*time.Second), map[string]int64{"nvml": 2}))
	waitCondition(t, admin, "gpu-r", corev1.ConditionFalse, "GPULost")
	waitEvent(t, admin, "gpu-r", "GPULost", 2, second.tick)

	// The carried XID ends with the node's reboot.
	n, err := admin.CoreV1().Nodes().Get(t.Context(), "gpu-s", metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.NodeInfo.BootID = "boot-2"
	_, err = admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitCondition(t, admin, "gpu-s", corev1.ConditionTrue, reasonHealthy)
}

// TestOneWriter: of two gateways that both receive health data, only the Lease holder writes;
// when it stops, the other takes over and writes what it judged.
func TestOneWriter(t *testing.T) {
	c := startCluster(t)
	admin := c.Admin
	clk := newClock()
	a := startWriter(t, c, clk, nil)
	a.waitLeading()
	b := startWriter(t, c, clk, nil)
	createGPUNode(t, admin, "gpu-b")
	g := gpuOn("gpu-b", 0)

	b.send(g.health(clk.Now(), map[string]int64{"row_remap": 2}))
	b.tick()
	a.tick()
	assert.Nil(t, b.w.leading(), "b does not hold the Lease")
	assert.Nil(t, nodeCondition(t, admin, "gpu-b"), "b judged, and wrote nothing: a holds the Lease, and has no data of gpu-b")
	poll.Until(t, eventually, "b's metrics", func() bool { return len(b.out.AllMetrics()) > 0 })
	assert.Equal(t, map[string]int64{"": 0}, points(b.out.AllMetrics()[0], "gpu_health_writer_leader"))
	assert.Empty(t, points(b.out.AllMetrics()[0], "gpu_node_unhealthy"), "only the holder reports nodes")

	a.stop()
	b.waitLeading()
	waitCondition(t, admin, "gpu-b", corev1.ConditionFalse, "RowRemapFailed")
	ev := waitEvent(t, admin, "gpu-b", "RowRemapFailed", 1, nil)
	assert.Equal(t, b.w.identity, ev.ReportingInstance)
	lease, err := admin.CoordinationV1().Leases(namespace).Get(t.Context(), "otelcol-gpu-health", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, b.w.identity, *lease.Spec.HolderIdentity)
}

// TestNodeOfAnotherCluster: data of a node the API server does not know (an edge cluster's
// agents sending to this gateway) is judged and nothing is written.
func TestNodeOfAnotherCluster(t *testing.T) {
	c := startCluster(t)
	clk := newClock()
	tw := startWriter(t, c, clk, nil)
	tw.waitLeading()
	tw.send(gpuOn("elsewhere", 0).health(clk.Now(), map[string]int64{"nvml": 2}))
	tw.tick()
	tw.out.Reset()
	tw.tick()
	poll.Until(t, eventually, "the writer's metrics", func() bool { return len(tw.out.AllMetrics()) > 0 })
	assert.Equal(t, map[string]int64{"operation=condition": 0, "operation=event": 0}, points(tw.out.AllMetrics()[0], "gpu_health_writer_errors_total"))
	assert.Empty(t, nodeEvents(t, c.Admin, "elsewhere"))

	// An hour after its data stopped, it is forgotten.
	tw.clk.Advance(forgetAfter)
	poll.Until(t, eventually, "the writer to forget the node", func() bool {
		tw.tick()
		tw.w.judge.mu.Lock()
		defer tw.w.judge.mu.Unlock()
		return tw.w.judge.nodes["elsewhere"] == nil
	})
}
