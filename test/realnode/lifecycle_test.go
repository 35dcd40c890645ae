// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// testPodEnds: a pod that ends takes its series with it at once (not after metric_expiration):
// its task series, its share of the shared GPU, its process on it; the other holder of that GPU
// then has all of it. The pod is started again afterwards, and the scenario renewed with its new
// process, for the installers that follow.
func testPodEnds(t *testing.T, w *workload) {
	const ns, name = "notebooks", "carol-jupyter"
	carol := w.pids[ns+"/"+name+"/notebook"]
	pod, err := node.Admin.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, node.Admin.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{}))
	poll.Until(t, time.Minute, fmt.Sprintf("%s/%s to be deleted", ns, name), func() bool {
		_, getErr := node.Admin.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(getErr)
	})

	poll.UntilNoError(t, waitFor, fmt.Sprintf("no series of %s/%s or its process %d, and bob's notebook alone on GPU %d", ns, name, carol, timeSlicedGPU), func() error {
		p, scrapeErr := scrape(agentMetrics)
		if scrapeErr != nil {
			return scrapeErr
		}
		for family := range p {
			if left := append(p.find(family, labels("pod_name", name)), p.find(family, labels("pid", fmt.Sprint(carol)))...); len(left) > 0 {
				return fmt.Errorf("%s %v", family, left)
			}
		}
		if bob := p.find("task_gpu_percent", labels("pod_name", "bob-jupyter", "uuid", gpus[timeSlicedGPU].UUID)); len(bob) != 1 || bob[0].value != 80 {
			return fmt.Errorf("bob's task_gpu_percent %v", bob)
		}
		return nil
	})

	// Back, with a new process: the scenario follows.
	pod.ObjectMeta = metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels}
	pod.Spec.NodeName, pod.Status = "", corev1.PodStatus{}
	_, err = node.Admin.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitRunning(t, ns, name)
	delete(w.pids, ns+"/"+name+"/notebook")
	w.scenario, err = renderScenario(w.pid)
	require.NoError(t, err)
}

// testRestarts: the agent restarted by its DaemonSet, and the node's kubelet restarted (by its
// PID): the series resume, and nothing crashes. The kubelet's pod-resources socket is a new one
// after its restart: the attribution through it resumes (erin's GPU is known from it alone).
func testRestarts(t *testing.T) {
	before := agentPod(t).Name
	out, err := node.Kubectl(nil, "rollout", "restart", "-n", namespace, "daemonset/otelcol-gpu-agent")
	require.NoError(t, err, out)
	rolledOut(t, "daemonset/otelcol-gpu-agent")
	assert.NotEqual(t, before, agentPod(t).Name, "a new agent pod")
	erinOnGPU4(t, "after the agent's restart")

	registrations := node.Plugin.Registrations()
	oldPID := node.KubeletPID()
	require.NoError(t, node.RestartKubelet())
	assert.NotEqual(t, oldPID, node.KubeletPID())
	const within = 2 * time.Minute
	err = poll.For(within, func() error {
		if node.Plugin.Registrations() == registrations {
			return errors.Join(errors.New("no registration since the restart"), node.Plugin.Err())
		}
		if !node.Allocatable(t.Context(), deviceResources(gpus)) {
			return errors.New("the node does not offer every device yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waited %s for the device plugin to register again with the restarted kubelet: %v; its log:\n%s", within, err, node.Log("kubelet", 30))
	}
	erinOnGPU4(t, "after the kubelet's restart")

	// Nothing crashed: no container of otelcol-gpu or of the workload restarted.
	pods, err := node.Admin.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range pods.Items {
		p := &pods.Items[i]
		for j := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[j]
			assert.Zero(t, cs.RestartCount, "%s/%s %s restarted", p.Namespace, p.Name, cs.Name)
		}
	}
}

// erinOnGPU4 waits for two GPU collections of the agent that attribute erin's job to GPU 4,
// which only the kubelet's pod-resources says (the pod's own NVIDIA_VISIBLE_DEVICES names GPU 0),
// so that at least one pod-resources refresh (every 10 s) came after what happened.
func erinOnGPU4(t *testing.T, when string) {
	t.Helper()
	var first float64 = -1
	poll.UntilNoError(t, waitFor, when+": erin's job on GPU 4 for two collections", func() error {
		p, err := scrape(agentMetrics)
		if err != nil {
			return err
		}
		collections := p.find("collector_iteration_count_total", labels("name", "gpu"))
		if len(collections) != 1 || len(p.find("task_gpu_percent", labels("pod_name", "sweep-3", "uuid", gpus[4].UUID))) != 1 ||
			len(p.find("task_gpu_percent", labels("pod_name", "sweep-3", "uuid", gpus[0].UUID))) != 0 {
			first = -1
			return fmt.Errorf("the agent's page: %v %v", p.find("task_gpu_percent", labels("pod_name", "sweep-3")), p.find("gpu_attribution_source_errors_total", nil))
		}
		if first < 0 {
			first = collections[0].value
		}
		if collections[0].value < first+2 {
			return fmt.Errorf("%g collections so far", collections[0].value-first)
		}
		return nil
	})
}

// testEdgeQueue: the edge overlay (deploy/overlays/edge) keeps the agent's queue on the node,
// so what could not be sent (its gateway is out of reach here) outlives a restart of the pod,
// and stays on the node after the uninstall, as deploy/README.md says, until it is removed.
func testEdgeQueue(t *testing.T, w *workload) {
	edge := kustomizeInstaller("edge")
	prepare(t, w.scenario)
	edge.install(t)
	rolledOut(t, "daemonset/otelcol-gpu-agent")
	queue := node.HostPath("/var/lib/otelcol-gpu/queue")

	// queued is how many bytes the agent's queue holds; an error while it holds none.
	queued := func() (float64, error) {
		p, err := scrape(agentTelemetry)
		if err != nil {
			return 0, err
		}
		var bytes float64
		for _, s := range p.find("otelcol_exporter_queue_size", labels("exporter", "otlp_grpc/gateway")) {
			bytes += s.value
		}
		if bytes == 0 {
			return 0, errors.New("otelcol_exporter_queue_size is 0")
		}
		return bytes, nil
	}
	var before float64
	if err := poll.For(waitFor, func() (err error) { before, err = queued(); return err }); err != nil {
		t.Fatalf("waited %s for the edge agent to queue what its unreachable gateway does not take: %v; its log:\n%s", waitFor, err, agentLog())
	}
	entries, err := os.ReadDir(queue)
	require.NoError(t, err, "the queue is on the node")
	require.NotEmpty(t, entries)

	out, err := node.Kubectl(nil, "rollout", "restart", "-n", namespace, "daemonset/otelcol-gpu-agent")
	require.NoError(t, err, out)
	rolledOut(t, "daemonset/otelcol-gpu-agent")
	var after float64
	poll.UntilNoError(t, waitFor, "the restarted agent to report its queue", func() (err error) { after, err = queued(); return err })
	assert.GreaterOrEqual(t, after, before, "the queue outlived the pod")

	edge.uninstall(t)
	gone(t)
	_, err = os.Stat(queue)
	assert.NoError(t, err, "the queue stays on the node after the uninstall (deploy/README.md: remove /var/lib/otelcol-gpu)")
	// What deploy/README.md asks for on each edge node.
	require.NoError(t, os.RemoveAll(node.HostPath("/var/lib/otelcol-gpu")))
}

// gone waits until namespace has gone, with everything in it.
func gone(t *testing.T) {
	t.Helper()
	// Also in a Cleanup, where t.Context() is already canceled.
	ctx := context.WithoutCancel(t.Context())
	poll.UntilNoError(t, 3*time.Minute, "namespace "+namespace+" to be deleted", func() error {
		ns, err := node.Admin.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		// What the namespace controller is still waiting for.
		var left []string
		for _, c := range ns.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				left = append(left, c.Message)
			}
		}
		return fmt.Errorf("%s: %s", ns.Status.Phase, strings.Join(left, "; "))
	})
	pods, err := node.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, pods.Items)
}
