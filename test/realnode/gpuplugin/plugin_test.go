// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// fakeKubelet is the kubelet's registration service on dir/kubelet.sock.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	srv *grpc.Server

	mu       sync.Mutex
	requests []*pluginapi.RegisterRequest
}

// startKubelet starts a fake kubelet the way a real one starts: it first removes every socket in
// the device-plugin directory, its plugins' included.
func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
	}
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	require.NoError(t, err)
	k := &fakeKubelet{srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(l) }()
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, req)
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) registered() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.requests...)
}

// endpoint connects to a registered plugin endpoint as the kubelet does.
func endpoint(t *testing.T, dir string, req *pluginapi.RegisterRequest) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// waitRegistrations waits until the plugin has registered n times (with every resource).
func waitRegistrations(t *testing.T, p *Plugin, n int, what string) {
	t.Helper()
	poll.UntilNoError(t, 10*time.Second, what, func() error {
		if got := p.Registrations(); got != n {
			return errors.Join(fmt.Errorf("%d registrations, want %d", got, n), p.Err())
		}
		return nil
	})
}

var (
	gpus = Resource{Name: "nvidia.com/gpu", IDs: []string{"GPU-a", "GPU-b", "GPU-c::0", "GPU-c::1"}}
	mig  = Resource{Name: "nvidia.com/mig-3g.20gb", IDs: []string{"MIG-x", "MIG-y"}}
)

func TestRegistersEachResource(t *testing.T) {
	dir := t.TempDir()
	kubelet := startKubelet(t, dir)
	p, err := Start(dir, gpus, mig)
	require.NoError(t, err)
	defer p.Stop()

	waitRegistrations(t, p, 1, "the plugin's registration with the kubelet")
	require.Len(t, kubelet.registered(), 2, "one registration per resource")
	byName := map[string]*pluginapi.RegisterRequest{}
	for _, req := range kubelet.registered() {
		assert.Equal(t, pluginapi.Version, req.Version)
		assert.True(t, req.Options.GetPreferredAllocationAvailable, req.ResourceName)
		byName[req.ResourceName] = req
	}
	require.Contains(t, byName, gpus.Name)
	require.Contains(t, byName, mig.Name)
	assert.NoError(t, p.Err())

	// The kubelet's side: the devices, all healthy.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := endpoint(t, dir, byName[mig.Name]).ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	list, err := stream.Recv()
	require.NoError(t, err)
	var ids []string
	for _, d := range list.Devices {
		assert.Equal(t, pluginapi.Healthy, d.Health, d.ID)
		ids = append(ids, d.ID)
	}
	assert.Equal(t, mig.IDs, ids)
}

func TestAllocation(t *testing.T) {
	dir := t.TempDir()
	kubelet := startKubelet(t, dir)
	p, err := Start(dir, gpus)
	require.NoError(t, err)
	defer p.Stop()
	waitRegistrations(t, p, 1, "the plugin's registration with the kubelet")
	client := endpoint(t, dir, kubelet.registered()[0])
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// Whole GPUs before time-slicing replicas, whatever order the kubelet lists them in.
	pref, err := client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"GPU-c::1", "GPU-c::0", "GPU-b", "GPU-a"}, AllocationSize: 2},
		{AvailableDeviceIDs: []string{"GPU-c::1", "GPU-c::0", "GPU-b"}, AllocationSize: 1},
		{AvailableDeviceIDs: []string{"GPU-c::1", "GPU-c::0"}, MustIncludeDeviceIDs: []string{"GPU-c::1"}, AllocationSize: 2},
	}})
	require.NoError(t, err)
	require.Len(t, pref.ContainerResponses, 3)
	assert.Equal(t, []string{"GPU-a", "GPU-b"}, pref.ContainerResponses[0].DeviceIDs)
	assert.Equal(t, []string{"GPU-b"}, pref.ContainerResponses[1].DeviceIDs)
	assert.Equal(t, []string{"GPU-c::1", "GPU-c::0"}, pref.ContainerResponses[2].DeviceIDs)

	// Nothing is set in the container: the allocation is only in the kubelet's records.
	alloc, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-c::0"}}}})
	require.NoError(t, err)
	require.Len(t, alloc.ContainerResponses, 1)
	assert.Empty(t, alloc.ContainerResponses[0].Envs)
	assert.Empty(t, alloc.ContainerResponses[0].Devices)
	assert.Empty(t, alloc.ContainerResponses[0].Mounts)

	_, err = client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-z"}}}})
	assert.ErrorContains(t, err, `nvidia.com/gpu has no device "GPU-z"`)
}

// TestRegistersAgainAfterKubeletRestart: a restarted kubelet has removed the plugin's socket and
// forgotten its devices; the plugin serves again and registers again, and not before the kubelet
// is back.
func TestRegistersAgainAfterKubeletRestart(t *testing.T) {
	dir := t.TempDir()
	// The plugin starts before the kubelet, as a DaemonSet's may.
	p, err := Start(dir, gpus)
	require.NoError(t, err)
	defer p.Stop()
	first := startKubelet(t, dir)
	waitRegistrations(t, p, 1, "the plugin's registration once the kubelet is up")

	first.srv.Stop()
	second := startKubelet(t, dir)
	waitRegistrations(t, p, 2, "the plugin's registration with the restarted kubelet")
	assert.Len(t, second.registered(), 1, "the restarted kubelet saw one registration")
	assert.Len(t, first.registered(), 1, "the first kubelet saw one registration")
	// The new registration's endpoint is served.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	opts, err := endpoint(t, dir, second.registered()[0]).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	assert.True(t, opts.GetPreferredAllocationAvailable)
}

func TestStopRemovesSockets(t *testing.T) {
	dir := t.TempDir()
	startKubelet(t, dir)
	p, err := Start(dir, gpus, mig)
	require.NoError(t, err)
	waitRegistrations(t, p, 1, "the plugin's registration with the kubelet")
	p.Stop()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"kubelet.sock"}, names)
}

func TestStartRefusesNothingToAdvertise(t *testing.T) {
	_, err := Start(t.TempDir())
	assert.ErrorContains(t, err, "no resource")
	_, err = Start(t.TempDir(), Resource{Name: "gpu", IDs: []string{"a"}})
	assert.ErrorContains(t, err, "domain-qualified")
	_, err = Start(t.TempDir(), Resource{Name: "nvidia.com/gpu"})
	assert.ErrorContains(t, err, "at least one device")
}
