// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package draplugin

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

const uuid = "GPU-5d2c4b1a-0000-4000-8000-000000000005"

func start(t *testing.T) (*Plugin, *fake.Clientset, string, string) {
	t.Helper()
	kubelet := t.TempDir()
	cdiDir := t.TempDir()
	client := fake.NewClientset()
	p, err := Start(Config{Driver: "gpu.nvidia.com", NodeName: "node-1", GPUs: []GPU{{UUID: uuid, Minor: 5}}, Client: client, KubeletDir: kubelet, CDIDir: cdiDir})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Stop()) })
	return p, client, kubelet, cdiDir
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRegistration: what the kubelet's plugin watcher finds in plugins_registry names the DRA
// service of the kubelet's own path, in the version kubelet 1.34 speaks.
func TestRegistration(t *testing.T) {
	p, _, kubelet, _ := start(t)
	reg := registerapi.NewRegistrationClient(dial(t, filepath.Join(kubelet, "plugins_registry", "gpu.nvidia.com-reg.sock")))
	info, err := reg.GetInfo(t.Context(), &registerapi.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, registerapi.DRAPlugin, info.Type)
	assert.Equal(t, "gpu.nvidia.com", info.Name)
	assert.Equal(t, "/var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock", info.Endpoint)
	assert.Equal(t, []string{"v1.DRAPlugin"}, info.SupportedVersions)
	assert.Zero(t, p.Registrations())
	_, err = reg.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{PluginRegistered: true})
	require.NoError(t, err)
	assert.Equal(t, 1, p.Registrations())
}

// TestSliceRepublished: the node's ResourceSlice, and again after the kubelet deleted it.
func TestSliceRepublished(t *testing.T) {
	_, client, _, _ := start(t)
	slices := client.ResourceV1().ResourceSlices()
	var slice *resourcev1.ResourceSlice
	poll.UntilNoError(t, 10*time.Second, "the ResourceSlice", func() (err error) {
		slice, err = slices.Get(t.Context(), "node-1-gpu.nvidia.com", metav1.GetOptions{})
		return err
	})
	assert.Equal(t, "gpu.nvidia.com", slice.Spec.Driver)
	assert.Equal(t, "node-1", *slice.Spec.NodeName)
	require.Len(t, slice.Spec.Devices, 1)
	assert.Equal(t, "gpu-5", slice.Spec.Devices[0].Name)
	assert.Equal(t, uuid, *slice.Spec.Devices[0].Attributes["uuid"].StringValue)

	require.NoError(t, slices.Delete(t.Context(), slice.Name, metav1.DeleteOptions{}))
	poll.UntilNoError(t, 10*time.Second, "the ResourceSlice published again", func() error {
		again, err := slices.Get(t.Context(), slice.Name, metav1.GetOptions{})
		if err == nil {
			assert.Greater(t, again.Spec.Pool.Generation, slice.Spec.Pool.Generation, "a new generation")
		}
		return err
	})
}

// TestPrepare: a claim allocated gpu-5 is prepared into a CDI spec that the agent's reader
// (internal/cdi) reads as /dev/nvidia5, under the CDI device the kubelet is told; unprepared, the
// spec is gone.
func TestPrepare(t *testing.T) {
	p, client, kubelet, cdiDir := start(t)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-gpu", Namespace: "llm", UID: "c1a1"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-5"}},
		}}},
	}
	_, err := client.ResourceV1().ResourceClaims("llm").Create(t.Context(), claim, metav1.CreateOptions{})
	require.NoError(t, err)

	dra := drapb.NewDRAPluginClient(dial(t, filepath.Join(kubelet, "plugins", "gpu.nvidia.com", "dra.sock")))
	req := []*drapb.Claim{{Namespace: "llm", Name: "llama-gpu", Uid: "c1a1"}}
	resp, err := dra.NodePrepareResources(t.Context(), &drapb.NodePrepareResourcesRequest{Claims: req})
	require.NoError(t, err)
	require.Contains(t, resp.Claims, "c1a1")
	got := resp.Claims["c1a1"]
	require.Empty(t, got.Error)
	require.Len(t, got.Devices, 1)
	assert.Equal(t, []string{"gpu"}, got.Devices[0].RequestNames)
	assert.Equal(t, "gpu-5", got.Devices[0].DeviceName)
	assert.Equal(t, []string{"k8s.gpu.nvidia.com/claim=c1a1-gpu-5"}, got.Devices[0].CdiDeviceIds)
	assert.Equal(t, 1, p.Prepared("c1a1"))

	devices, err := cdi.NewReader("/", []string{cdiDir}).Read()
	require.NoError(t, err)
	assert.Equal(t, []string{"/dev/nvidia5"}, devices["k8s.gpu.nvidia.com/claim=c1a1-gpu-5"], "the agent's reading of the spec: %v", devices)

	// A claim of another node's device is refused, not prepared.
	_, err = client.ResourceV1().ResourceClaims("llm").Create(t.Context(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "llm", UID: "c2"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-2", Device: "gpu-5"}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	resp, err = dra.NodePrepareResources(t.Context(), &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: "llm", Name: "other", Uid: "c2"}}})
	require.NoError(t, err)
	assert.NotEmpty(t, resp.Claims["c2"].Error)
	assert.Error(t, p.Err())

	_, err = dra.NodeUnprepareResources(t.Context(), &drapb.NodeUnprepareResourcesRequest{Claims: req})
	require.NoError(t, err)
	devices, err = cdi.NewReader("/", []string{cdiDir}).Read()
	require.NoError(t, err)
	assert.Empty(t, devices, "the claim's spec removed")
}
