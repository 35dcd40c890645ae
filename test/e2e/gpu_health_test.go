// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestGPUHealthThroughTheGateway runs the GPU health path as it ships: make demo's agent (the
// simulated DGX A100 with the demo's faults within seconds) sends its OTLP over TLS with the
// token to distro/gateway.yaml, whose k8s_gpu_health writes into a real kube-apiserver with the
// RBAC of deploy/. The node's GPUHealthy turns False naming the faults that call for action,
// each with an Event, and not the application's XID; the gateway's page reports the node and
// that it holds the Lease.
func TestGPUHealthThroughTheGateway(t *testing.T) {
	root := repoRoot(t)
	cluster := kube.Start(t, "gateway")
	cluster.GrantManifests("gateway", "otelcol-gpu",
		filepath.Join(root, "deploy", "base", "rbac.yaml"), filepath.Join(root, "deploy", "base", "health-rbac.yaml"))
	admin := cluster.Admin
	node, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-07"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	node.Status = corev1.NodeStatus{
		NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"},
		Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
	}
	_, err = admin.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)

	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets,
		"connectors::k8s_gpu_health::kubeconfig_path="+cluster.Kubeconfig("gateway"),
		"connectors::k8s_gpu_health::sync_timeout=1m",
		"connectors::k8s_gpu_health::interval=1s",
		"connectors::k8s_gpu_health::leader_election::lease_namespace=otelcol-gpu")
	startDemo(t, filepath.Join(root, "test", "e2e", "testdata", "demo-compressed.yaml"),
		filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::gpu::node_name=dgx-07",
		// What distro/agent.yaml sends the gateway, as it sends it.
		"extensions::bearertokenauth/gateway::filename="+secrets.AgentToken,
		"service::extensions=[health_check,bearertokenauth/gateway]",
		"exporters::otlp_grpc/gateway::endpoint="+gateway.OTLP,
		"exporters::otlp_grpc/gateway::tls::ca_file="+secrets.AgentCA,
		"exporters::otlp_grpc/gateway::auth::authenticator=bearertokenauth/gateway",
		"service::pipelines::metrics/gateway::receivers=[gpu]",
		"service::pipelines::metrics/gateway::processors=[memory_limiter]",
		"service::pipelines::metrics/gateway::exporters=[otlp_grpc/gateway]",
		"service::pipelines::logs::exporters=[debug,otlp_grpc/gateway]",
	)

	// GPU 3: XID 79 and off the bus; GPU 4: a failed row remap; GPU 2: a double-bit ECC error
	// and a pending remap. GPU 1's XID 13 is the application's, GPU 6's 8-second hang shorter
	// than driver_hang::for, GPU 5's degraded link younger than pcie_downgrade::for.
	var condition corev1.NodeCondition
	poll.UntilNoError(t, 2*time.Minute, "dgx-07's GPUHealthy to name every fault that calls for action", func() error {
		n, err := admin.CoreV1().Nodes().Get(t.Context(), "dgx-07", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == "GPUHealthy" {
				condition = c
			}
		}
		for _, want := range []string{"XID 79", "lost", "row remapping failed", "double-bit", "waits for a GPU reset"} {
			if !strings.Contains(condition.Message, want) {
				return fmt.Errorf("%q lacks %q", condition.Message, want)
			}
		}
		return nil
	})
	assert.Equal(t, corev1.ConditionFalse, condition.Status)
	assert.Equal(t, "XIDError", condition.Reason)
	assert.True(t, strings.HasPrefix(condition.Message, "inspect_hardware: "), condition.Message)
	assert.NotContains(t, condition.Message, "XID 13")
	assert.NotContains(t, condition.Message, "hung")

	// The Events of a pass are written after its condition.
	reasons := map[string]int32{}
	poll.UntilNoError(t, time.Minute, "an Event per fault on dgx-07", func() error {
		events, err := admin.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": "dgx-07"}.String(),
		})
		if err != nil {
			return err
		}
		clear(reasons)
		for i := range events.Items {
			reasons[events.Items[i].Reason] += events.Items[i].Count
		}
		for _, reason := range []string{"XIDError", "GPULost", "RowRemapFailed", "DoubleBitECCError", "RowRemapPending"} {
			if reasons[reason] == 0 {
				return fmt.Errorf("no %s Event: %v", reason, reasons)
			}
		}
		return nil
	})
	assert.Equal(t, int32(1), reasons["XIDError"], "XID 79 once")

	eventually(t, "the gateway's page to report the node waiting for action", func() bool {
		page, err := httpGet(gateway.Metrics)
		return err == nil &&
			strings.Contains(string(page), `gpu_node_unhealthy{action="inspect_hardware",fault="xid",node_name="dgx-07",severity="fatal"} 1`) &&
			strings.Contains(string(page), "gpu_health_writer_leader 1")
	})
}
