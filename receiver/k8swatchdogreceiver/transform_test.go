// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTransformStripsPods(t *testing.T) {
	s := newStripper(createDefaultConfig().(*Config))
	p := fixtureCluster()[4].(*corev1.Pod) // job1-worker-0
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	p.Labels = map[string]string{"app": "x", "pod-template-hash": "abc"}
	p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
	p.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("4")
	p.Spec.Volumes = []corev1.Volume{{Name: "data"}}

	obj, err := s.transform(p)
	require.NoError(t, err)
	got := obj.(*corev1.Pod)
	assert.Empty(t, got.ManagedFields)
	assert.Equal(t, map[string]string{"app": "x"}, got.Labels, "only the service and job-name labels are kept")
	assert.Nil(t, got.Annotations)
	assert.Nil(t, got.Spec.Volumes)
	assert.Equal(t, []corev1.EnvVar{{Name: "PAI_JOB_NAME", Value: "alice~job1"}}, got.Spec.Containers[0].Env)
	assert.Equal(t, gpus(2), got.Spec.Containers[0].Resources.Limits, "only GPU resources are kept")
	assert.Equal(t, p.Status.ContainerStatuses[0].State, got.Status.ContainerStatuses[0].State)
	assert.Equal(t, p.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, int64(4), podGPUs(got, []string{"nvidia.com/gpu"}))
}

func TestTransformStripsNodes(t *testing.T) {
	s := newStripper(createDefaultConfig().(*Config))
	n := fixtureCluster()[0].(*corev1.Node)
	n.Status.Allocatable["cpu"] = resource.MustParse("64")
	obj, err := s.transform(n)
	require.NoError(t, err)
	got := obj.(*corev1.Node)
	assert.Equal(t, gpus(16), got.Status.Allocatable)
	assert.Equal(t, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}, got.Status.Addresses)
	for _, c := range got.Status.Conditions {
		assert.True(t, c.LastHeartbeatTime.IsZero(), "heartbeats would make every status report look like a change")
	}
	assert.Nil(t, got.Labels)

	// A node whose allocatable has no GPU keeps an empty allocatable, so that capacity is not
	// used instead.
	n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64")}
	obj, err = s.transform(n)
	require.NoError(t, err)
	assert.Equal(t, int64(0), nodeGPUs(obj.(*corev1.Node), []string{"nvidia.com/gpu"}))
}

func TestTransformPassesTombstonesThrough(t *testing.T) {
	s := newStripper(createDefaultConfig().(*Config))
	tomb := cache.DeletedFinalStateUnknown{Key: "default/x"}
	obj, err := s.transform(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, obj)
}
