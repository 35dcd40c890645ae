// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
)

// gatewayMetrics is the gateway pod's page, on the pod network.
func gatewayMetrics(t *testing.T) string {
	t.Helper()
	pods, err := node.Admin.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
	require.NoError(t, err)
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return "http://" + p.Status.PodIP + ":9102/metrics"
		}
	}
	t.Fatalf("no running gateway pod among %d", len(pods.Items))
	return ""
}

// testGateway: the gateway's k8s_watchdog reports the real node and its pods, with the GPUs the
// device plugin gives the node (through the Kubernetes API, with deploy/'s read-only RBAC), and
// the node's own series arrive from its agent over OTLP, under the node's identity.
func testGateway(t *testing.T) {
	url := gatewayMetrics(t)
	n, err := node.Admin.CoreV1().Nodes().Get(t.Context(), realnode.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	capacity := n.Status.Capacity[gpuResource]
	var requested int64
	pods, err := node.Admin.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range pods.Items {
		for j := range pods.Items[i].Spec.Containers {
			q := pods.Items[i].Spec.Containers[j].Resources.Limits[gpuResource]
			requested += q.Value()
		}
	}

	nodeLabels := labels("node_name", realnode.NodeName, "host_ip", realnode.NodeIP)
	identity := labels("node_name", realnode.NodeName, "instance", realnode.NodeIP+":9102")
	var p page
	err = poll.For(waitFor, func() error {
		var scrapeErr error
		if p, scrapeErr = scrape(url); scrapeErr != nil {
			return scrapeErr
		}
		var missing []string
		for _, want := range []struct {
			metric string
			match  map[string]string
		}{
			{"pai_node_count", nodeLabels},
			{"k8s_node_gpu_total", nodeLabels},
			{"pai_pod_count", labels("name", "log-manager")},
			{"task_gpu_percent", identity},
		} {
			if len(p.find(want.metric, want.match)) == 0 {
				missing = append(missing, fmt.Sprintf("%s %v", want.metric, want.match))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the page lacks %v", missing)
		}
		return nil
	})
	if err != nil {
		logs, _ := node.Kubectl(nil, "logs", "-n", namespace, "deployment/otelcol-gpu-gateway", "--tail=40")
		t.Fatalf("waited %s for the watchdog's node, GPUs and pods and the agent's series on the gateway's page: %v; the gateway's log:\n%s", waitFor, err, logs)
	}

	assert.Equal(t, []sample{{labels: labels("node_name", realnode.NodeName, "host_ip", realnode.NodeIP, "ready", "true",
		"disk_pressure", "false", "memory_pressure", "false", "pid_pressure", "false", "unschedulable", "false"), value: 1}},
		p.find("pai_node_count", nil), "pai_node_count: the one real node, ready")
	for metric, want := range map[string]int64{
		"k8s_node_gpu_total":     capacity.Value(),
		"k8s_node_gpu_available": capacity.Value() - requested,
		"k8s_node_gpu_reserved":  0,
	} {
		if got := p.find(metric, nodeLabels); assert.Len(t, got, 1, metric) {
			assert.Equal(t, float64(want), got[0].value, "%s, from the device plugin's %s", metric, gpuResource)
		}
	}
	assert.Len(t, p.find("pai_pod_count", labels("service_name", "log-manager", "name", "log-manager", "namespace", "pai",
		"phase", "running", "node_name", realnode.NodeName, "host_ip", realnode.NodeIP, "ready", "true")), 1, "the platform's service pod")
	for pod, job := range map[string]string{"resnet-worker-0": "alice~resnet50", "sweep-3": "erin~sweep", "bob-jupyter": "bob~explore", "bert-infer-0": "dave~bert-infer"} {
		assert.Len(t, p.find("pai_job_pod_count", labels("job_name", job, "name", pod, "phase", "running", "node_name", realnode.NodeName)), 1, "job pod %s", pod)
	}
	// Its informers list and watch with deploy/'s RBAC: a verb missing there shows in the log
	// only (a forbidden watch leaves the lists, and data refreshed only when they are retried).
	logs, err := node.Kubectl(nil, "logs", "-n", namespace, "deployment/otelcol-gpu-gateway")
	require.NoError(t, err, logs)
	var forbidden []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "forbidden") {
			forbidden = append(forbidden, line)
		}
	}
	assert.Empty(t, forbidden, "the gateway may do what it asks the API server")
	// Through the gateway, the node's series keep its instance (deploy/README.md).
	assert.Len(t, p.find("task_gpu_percent", labels("pod_name", "resnet-worker-0", "instance", realnode.NodeIP+":9102")), 2,
		"alice's two GPUs, from the agent over OTLP")
	assert.NotEmpty(t, p.find("node_load1", identity), "the node's own series")
}
