// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package k8sgpuhealthconnector

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// TestDeviceTaintOnTheAPIServer: on kube-apiserver 1.34 with DRA's device taints on (the gate
// and resource.k8s.io/v1alpha3), the writer discovers v1alpha3 and takes a faulty GPU of the
// node's ResourceSlice out with a DeviceTaintRule there, the node left in service; with the
// writer's own permissions (the quarantine component's ClusterRole).
func TestDeviceTaintOnTheAPIServer(t *testing.T) {
	c := startCluster(t)
	c.RestartAPIServerWith("--feature-gates=DRADeviceTaints=true", "--runtime-config=resource.k8s.io/v1alpha3=true")
	admin := c.Admin
	createGPUNode(t, admin, "dra-1")
	_, err := admin.ResourceV1().ResourceSlices().Create(t.Context(), draSlice("dra-1", map[int64]string{0: gpuOn("dra-1", 0).uuid, 1: gpuOn("dra-1", 1).uuid}), metav1.CreateOptions{})
	require.NoError(t, err)

	clk := newClock()
	tw := startWriter(t, c, clk, quarantineOn)
	tw.waitLeading()
	tw.send(gpuOn("dra-1", 1).health(clk.Now(), map[string]int64{"row_remap": 1}))

	poll.UntilNoError(t, eventually, "a DeviceTaintRule for GPU 1's device", func() error {
		tw.tick()
		rules, err := admin.ResourceV1alpha3().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(rules.Items) != 1 {
			return fmt.Errorf("%d rules", len(rules.Items))
		}
		r := rules.Items[0]
		if *r.Spec.DeviceSelector.Device != "gpu-1" || *r.Spec.DeviceSelector.Pool != "dra-1" || r.Spec.Taint.Key != TaintKey || string(r.Spec.Taint.Effect) != "NoSchedule" {
			return errors.New("not GPU 1's device: " + r.String())
		}
		return nil
	})
	assert.Equal(t, "v1alpha3", tw.w.devices.version)
	node := getNode(t, admin, "dra-1")
	assert.False(t, node.Spec.Unschedulable, "the node stays in service")
	for _, taint := range node.Spec.Taints {
		assert.NotEqual(t, TaintKey, taint.Key)
	}
	assert.Empty(t, node.Annotations[AnnotationQuarantine])
	assert.Equal(t, corev1.ConditionFalse, nodeCondition(t, admin, "dra-1").Status, "the condition says it all the same")
}
