// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8swatchdogreceiver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
)

// eventually waits for a condition on the receiver's output; the limit only bounds a failing
// test, nothing is asserted about how long it took.
const eventually = 60 * time.Second

// createNode creates a node and writes its status, as a kubelet would.
func createNode(t *testing.T, admin kubernetes.Interface, n *corev1.Node) {
	t.Helper()
	created, err := admin.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = n.Status
	_, err = admin.CoreV1().Nodes().UpdateStatus(t.Context(), created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func createPod(t *testing.T, admin kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	status := p.Status
	created, err := admin.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = status
	_, err = admin.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// changePod reads a pod, changes its status and writes it back, as a kubelet would.
func changePod(t *testing.T, admin kubernetes.Interface, ns, name string, change func(*corev1.Pod)) {
	t.Helper()
	p, err := admin.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	change(p)
	_, err = admin.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func changeNodeStatus(t *testing.T, admin kubernetes.Interface, name string, change func(*corev1.Node)) {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	change(n)
	_, err = admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func cordon(t *testing.T, admin kubernetes.Interface, name string, unschedulable bool) {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Unschedulable = unschedulable
	_, err = admin.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// points lists a metric's live data points in md as "label=value,..." -> value (points that end
// a series, flagged NoRecordedValue, are left out).
func points(md pmetric.Metrics, name string) map[string]int64 {
	out := map[string]int64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != name {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				case pmetric.MetricTypeHistogram:
					out[""] = int64(m.Histogram().DataPoints().At(0).Count())
					continue
				}
				for l := 0; l < dps.Len(); l++ {
					if !dps.At(l).Flags().NoRecordedValue() {
						out[labels(dps.At(l).Attributes())] = dps.At(l).IntValue()
					}
				}
			}
		}
	}
	return out
}

func labels(attrs pcommon.Map) string {
	var kv []string
	for k, v := range attrs.All() {
		kv = append(kv, k+"="+v.AsString())
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

func label(kv ...string) string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kv[i]+"="+kv[i+1])
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func latest(sink *consumertest.MetricsSink) pmetric.Metrics {
	all := sink.AllMetrics()
	if len(all) == 0 {
		return pmetric.NewMetrics()
	}
	return all[len(all)-1]
}

// waitMetrics waits until the latest collection satisfies check, which returns what is still
// wrong ("" when nothing is).
func waitMetrics(t *testing.T, sink *consumertest.MetricsSink, what string, check func(md pmetric.Metrics) string) pmetric.Metrics {
	t.Helper()
	var md pmetric.Metrics
	poll.UntilNoError(t, eventually, what, func() error {
		md = latest(sink)
		if problem := check(md); problem != "" {
			return errors.New(problem)
		}
		return nil
	})
	return md
}

// expect returns a check that each metric has at least the given series with the given values.
func expect(want map[string]map[string]int64) func(pmetric.Metrics) string {
	return func(md pmetric.Metrics) string {
		for _, name := range slices.Sorted(maps.Keys(want)) {
			got := points(md, name)
			for s, v := range want[name] {
				if gv, ok := got[s]; !ok || gv != v {
					return fmt.Sprintf("%s{%s}: got %d (present: %v), want %d; all: %v", name, s, gv, ok, v, got)
				}
			}
		}
		return ""
	}
}

// logKeys lists the records received, in order, by event name and body.
func logKeys(sink *consumertest.LogsSink) []string {
	var keys []string
	for _, l := range sink.AllLogs() {
		for i := 0; i < l.ResourceLogs().Len(); i++ {
			sls := l.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					keys = append(keys, lr.EventName()+" "+lr.Body().Str())
				}
			}
		}
	}
	return keys
}

// TestAgainstRealAPIServer runs the receiver, built by its factory with both signals, against a
// real kube-apiserver and etcd: it creates nodes and pods, changes their status the way kubelets
// and operators do, and checks every metric and every kind of status-change record; then it stops
// the API server, checks that the outage is reported and that the receiver carries on, restarts
// it and checks that watching resumes without logging anything twice.
func TestAgainstRealAPIServer(t *testing.T) {
	c := kube.Start(t, "watchdog")
	admin := c.Admin
	ctx := t.Context()
	c.GrantWatchdog("watchdog")

	ready := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for name, n := range map[string]int64{"gpu-1": 8, "gpu-2": 4} {
		ip := map[string]string{"gpu-1": "10.1.0.1", "gpu-2": "10.1.0.2"}[name]
		createNode(t, admin, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{
				Capacity:    gpus(n),
				Allocatable: gpus(n),
				Conditions:  slices.Clone(ready),
				Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			},
		})
	}
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pai"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	podConds := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: s},
			{Type: corev1.PodReady, Status: s},
		}
	}
	worker := ctr("worker", 2)
	worker.Env = []corev1.EnvVar{{Name: "PAI_JOB_NAME", Value: "alice~job1"}}
	createPod(t, admin, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pai", Name: "rest-server-0", Labels: map[string]string{"app": "rest-server"}},
		Spec:       corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{ctr("server", 0)}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.1.0.1", Conditions: podConds(corev1.ConditionTrue),
			ContainerStatuses: []corev1.ContainerStatus{e2eStatus(running("server"))},
		},
	})
	createPod(t, admin, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job1-worker-0"},
		Spec:       corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{worker, ctr("helper", 2)}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.1.0.1", Conditions: podConds(corev1.ConditionTrue),
			ContainerStatuses: []corev1.ContainerStatus{e2eStatus(running("worker")), e2eStatus(running("helper"))},
		},
	})
	createPod(t, admin, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train-0", Labels: map[string]string{"batch.kubernetes.io/job-name": "train"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("main", 3)}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"},
		}},
	})

	// The receiver, as the collector builds it: one factory, a metrics and a logs receiver on
	// one configuration, so one set of informers.
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthTypeKubeConfig
	cfg.KubeConfigPath = c.Kubeconfig("watchdog")
	cfg.CollectionInterval = 300 * time.Millisecond
	cfg.HealthzTimeout = 300 * time.Millisecond
	require.NoError(t, cfg.Validate())
	metrics, logs := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	set := receivertest.NewNopSettings(metadata.Type)
	mr, err := f.CreateMetrics(ctx, set, cfg, metrics)
	require.NoError(t, err)
	lr, err := f.CreateLogs(ctx, set, cfg, logs)
	require.NoError(t, err)
	require.NoError(t, mr.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, lr.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() {
		assert.NoError(t, mr.Shutdown(ctx))
		assert.NoError(t, lr.Shutdown(ctx))
	})

	gpu1 := []string{"host_ip", "10.1.0.1", "node_name", "gpu-1"}
	gpu2 := []string{"host_ip", "10.1.0.2", "node_name", "gpu-2"}
	md := waitMetrics(t, metrics, "initial state", expect(map[string]map[string]int64{
		"k8s_api_server_count": {label("error", "ok", "host_ip", "127.0.0.1"): 1},
		"pai_node_count": {
			label(append(gpu1, "disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "ready", "true", "unschedulable", "false")...): 1,
			label(append(gpu2, "disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "ready", "true", "unschedulable", "false")...): 1,
		},
		"pai_pod_count": {label("service_name", "rest-server", "name", "rest-server-0", "namespace", "pai", "phase", "running",
			"host_ip", "10.1.0.1", "node_name", "gpu-1", "initialized", "true", "pod_scheduled", "true", "ready", "true"): 1},
		"pai_container_count": {label("service_name", "rest-server", "pod_name", "rest-server-0", "name", "server", "namespace", "pai",
			"state", "running", "host_ip", "10.1.0.1", "node_name", "gpu-1", "ready", "true"): 1},
		"pai_job_pod_count": {
			label("job_name", "alice~job1", "name", "job1-worker-0", "phase", "running", "host_ip", "10.1.0.1", "node_name", "gpu-1",
				"initialized", "true", "pod_bound", "true", "pod_scheduled", "true", "ready", "true"): 1,
			label("job_name", "train", "name", "train-0", "phase", "pending", "host_ip", "unscheduled", "node_name", "",
				"initialized", "unknown", "pod_bound", "false", "pod_scheduled", "false", "ready", "unknown"): 1,
		},
		"k8s_node_gpu_total":     {label(gpu1...): 8, label(gpu2...): 4},
		"k8s_node_gpu_available": {label(gpu1...): 4, label(gpu2...): 4},
		"k8s_node_gpu_reserved":  {label(gpu1...): 0, label(gpu2...): 0},
		"process_error_log_total": {
			label("type", "healthz"): 0, label("type", "parse"): 0, label("type", "unknown_pod_cond"): 0,
			label("type", "unknown_node_cond"): 0, label("type", "unexpected_container_state"): 0,
		},
	}))
	for _, name := range histogramNames {
		assert.GreaterOrEqual(t, points(md, name)[""], int64(1), name)
	}
	require.Zero(t, logs.LogRecordCount(), "the initial state is not a change")

	// Status changes, each of a different kind.
	changeNodeStatus(t, admin, "gpu-1", func(n *corev1.Node) {
		n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionFalse, "KubeletNotReady"
		n.Status.Conditions[0].Message = "container runtime is down"
		// One GPU fell off the bus: the device plugin reports one fewer.
		n.Status.Allocatable = gpus(7)
	})
	cordon(t, admin, "gpu-2", true)
	changePod(t, admin, "default", "job1-worker-0", func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].RestartCount = 1
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "OOMKilled", ExitCode: 137, StartedAt: metav1.Now(), FinishedAt: metav1.Now(),
		}}
	})
	changePod(t, admin, "pai", "rest-server-0", func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0] = e2eStatus(waiting("server", "CrashLoopBackOff"))
		p.Status.Conditions = podConds(corev1.ConditionFalse)
	})
	// The pending pod is bound to gpu-2 (what the scheduler does) and starts.
	require.NoError(t, admin.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train-0"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "gpu-2"},
	}, metav1.CreateOptions{}))
	changePod(t, admin, "default", "train-0", func(p *corev1.Pod) {
		p.Status.Phase, p.Status.HostIP, p.Status.Conditions = corev1.PodRunning, "10.1.0.2", podConds(corev1.ConditionTrue)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{e2eStatus(running("main"))}
	})
	// The job ends: its four GPUs are free again.
	changePod(t, admin, "default", "job1-worker-0", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now(),
			}}
			p.Status.ContainerStatuses[i].Ready = false
		}
	})

	wantLogs := []string{
		"k8s.node.condition.changed node gpu-1 condition Ready True -> False: KubeletNotReady: container runtime is down",
		"k8s.node.schedulable.changed node gpu-2 cordoned",
	}
	// Pods and nodes come through separate informers: compare the two streams separately.
	wantPodLogs := []string{
		"k8s.container.restarted container default/job1-worker-0/worker restarted, restart count 1 (previous run ended: OOMKilled, exit code 137)",
		"k8s.container.state.changed container pai/rest-server-0/server running -> waiting: CrashLoopBackOff",
		"k8s.pod.phase.changed pod default/train-0 phase Pending -> Running",
		"k8s.container.state.changed container default/train-0/main absent -> running",
		"k8s.pod.phase.changed pod default/job1-worker-0 phase Running -> Succeeded",
		"k8s.container.state.changed container default/job1-worker-0/worker running -> terminated: Completed",
		"k8s.container.state.changed container default/job1-worker-0/helper running -> terminated: Completed",
	}
	waitSplitLogs(t, logs, wantLogs, wantPodLogs)

	waitMetrics(t, metrics, "after the changes", expect(map[string]map[string]int64{
		"pai_node_count": {
			label(append(gpu1, "disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "ready", "false", "unschedulable", "false")...): 1,
			label(append(gpu2, "disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "ready", "true", "unschedulable", "true")...):   1,
		},
		"pai_container_count": {label("service_name", "rest-server", "pod_name", "rest-server-0", "name", "server", "namespace", "pai",
			"state", "waiting", "host_ip", "10.1.0.1", "node_name", "gpu-1", "ready", "false"): 1},
		"pai_pod_count": {label("service_name", "rest-server", "name", "rest-server-0", "namespace", "pai", "phase", "running",
			"host_ip", "10.1.0.1", "node_name", "gpu-1", "initialized", "true", "pod_scheduled", "true", "ready", "false"): 1},
		"pai_job_pod_count": {
			label("job_name", "alice~job1", "name", "job1-worker-0", "phase", "succeeded", "host_ip", "10.1.0.1", "node_name", "gpu-1",
				"initialized", "true", "pod_bound", "true", "pod_scheduled", "true", "ready", "true"): 1,
			label("job_name", "train", "name", "train-0", "phase", "running", "host_ip", "10.1.0.2", "node_name", "gpu-2",
				"initialized", "true", "pod_bound", "true", "pod_scheduled", "true", "ready", "true"): 1,
		},
		// gpu-1: 7 GPUs left, and the finished job holds none. gpu-2: cordoned, 3 of 4 GPUs
		// used by train-0.
		"k8s_node_gpu_total":     {label(gpu1...): 7, label(gpu2...): 4},
		"k8s_node_gpu_available": {label(gpu1...): 7, label(gpu2...): 0},
		"k8s_node_gpu_reserved":  {label(gpu1...): 0, label(gpu2...): 1},
	}))

	// The series a change replaced were ended once, for the prometheus exporter to drop them.
	schedulable := label(append(gpu2, "disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "ready", "true", "unschedulable", "false")...)
	assert.Equal(t, 1, endedCount(metrics, "pai_node_count", schedulable))

	// The API server goes away: the receiver reports it and keeps running.
	c.StopAPIServer()
	md = waitMetrics(t, metrics, "API server down", func(md pmetric.Metrics) string {
		if got := points(md, "k8s_api_server_count"); got[label("error", "connection refused", "host_ip", "127.0.0.1")] != 1 {
			return fmt.Sprintf("k8s_api_server_count: %v", got)
		}
		// client-go retries a broken watch from where it was (no LIST, so no "parse" error):
		// the failed probes are what counts the outage.
		if errs := points(md, "process_error_log_total"); errs[label("type", "healthz")] == 0 {
			return fmt.Sprintf("process_error_log_total: %v (failed /healthz probes expected)", errs)
		}
		return ""
	})
	// The caches keep the last state seen: the cluster metrics are still there.
	assert.Len(t, points(md, "pai_node_count"), 2)

	c.StartAPIServer()
	waitMetrics(t, metrics, "API server back", expect(map[string]map[string]int64{
		"k8s_api_server_count": {label("error", "ok", "host_ip", "127.0.0.1"): 1},
	}))
	// The informers watch again: a new change comes through, once, and nothing before it is
	// logged a second time by the relist.
	changePod(t, admin, "pai", "rest-server-0", func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0] = e2eStatus(running("server"))
		p.Status.ContainerStatuses[0].RestartCount = 1
	})
	uncordonAfterOutage := "k8s.node.schedulable.changed node gpu-2 uncordoned"
	cordon(t, admin, "gpu-2", false)
	waitSplitLogs(t, logs, append(wantLogs, uncordonAfterOutage), append(wantPodLogs,
		"k8s.container.restarted container pai/rest-server-0/server restarted, restart count 1",
		"k8s.container.state.changed container pai/rest-server-0/server waiting (CrashLoopBackOff) -> running",
	))
}

// endedCount counts the points, over every collection so far, that end the series.
func endedCount(sink *consumertest.MetricsSink, name, series string) int {
	n := 0
	for _, md := range sink.AllMetrics() {
		for r := 0; r < md.ResourceMetrics().Len(); r++ {
			sms := md.ResourceMetrics().At(r).ScopeMetrics()
			for s := 0; s < sms.Len(); s++ {
				ms := sms.At(s).Metrics()
				for i := 0; i < ms.Len(); i++ {
					if ms.At(i).Name() != name {
						continue
					}
					dps := ms.At(i).Gauge().DataPoints()
					for j := 0; j < dps.Len(); j++ {
						if dps.At(j).Flags().NoRecordedValue() && labels(dps.At(j).Attributes()) == series {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// waitSplitLogs waits for the node and pod records and compares each stream in order.
func waitSplitLogs(t *testing.T, sink *consumertest.LogsSink, nodes, pods []string) {
	t.Helper()
	poll.Until(t, eventually, fmt.Sprintf("%d node and pod records", len(nodes)+len(pods)), func() bool { return sink.LogRecordCount() >= len(nodes)+len(pods) })
	var gotNodes, gotPods []string
	for _, k := range logKeys(sink) {
		if strings.HasPrefix(k, "k8s.node.") {
			gotNodes = append(gotNodes, k)
		} else {
			gotPods = append(gotPods, k)
		}
	}
	require.Equal(t, nodes, gotNodes)
	require.Equal(t, pods, gotPods)
}
