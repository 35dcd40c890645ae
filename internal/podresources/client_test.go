// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package podresources

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/grpclog"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

const gpu = "nvidia.com/gpu"

// grpcWarnings is what gRPC logs at warning level and above; the collector routes gRPC's log to
// its own at that level, so anything here would reach the user's console.
var grpcWarnings lockedBuffer

func TestMain(m *testing.M) {
	// Before any gRPC call: gRPC reads its logger without a lock.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, &grpcWarnings, &grpcWarnings))
	os.Exit(m.Run())
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// socketPath is short: unix socket paths are limited to 108 bytes and t.TempDir() can be long.
func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "podres") //nolint:usetesting // short, as said above
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

func startServer(t *testing.T) *podresourcestest.Server {
	srv, err := podresourcestest.NewServer(socketPath(t))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, socket string, timeout time.Duration) (*Client, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	c, err := New(Settings{Socket: socket, RefreshInterval: time.Hour, Timeout: timeout, Logger: zap.New(core)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, logs
}

func TestListAndAllocatable(t *testing.T) {
	srv := startServer(t)
	srv.SetAllocatable(&v1.ContainerDevices{ResourceName: gpu, DeviceIds: []string{"GPU-a", "GPU-b"}})
	srv.SetPods(
		podresourcestest.Pod("team-a", "train-0", podresourcestest.Container("main", gpu, "GPU-a"), podresourcestest.Container("sidecar", "")),
		podresourcestest.Pod("kube-system", "dns"),
	)
	c, _ := newClient(t, srv.Socket, 5*time.Second)

	c.Refresh()
	snap := c.Snapshot()
	require.NotNil(t, snap)
	assert.Equal(t, map[PodKey]struct{}{{"team-a", "train-0"}: {}, {"kube-system", "dns"}: {}}, snap.Pods)
	assert.Equal(t, map[ContainerKey][]Device{
		{PodKey{"team-a", "train-0"}, "main"}: {{Resource: gpu, IDs: []string{"GPU-a"}}},
	}, snap.Devices, "only containers with devices")
	assert.Equal(t, []Device{{Resource: gpu, IDs: []string{"GPU-a", "GPU-b"}}}, snap.Allocatable)

	c.Refresh()
	assert.Equal(t, 2, srv.Calls("GetAllocatableResources"), "allocatable is read at every refresh: a device plugin registers late")
	assert.Equal(t, 2, srv.Calls("List"))
	assert.EqualValues(t, 4, c.Calls())
	assert.True(t, c.Answering())
	assert.True(t, c.Seen())
}

// TestAllocatableRemembered: a restarted kubelet lists no allocatable device until its device
// plugins register again; the devices it listed before stay in every snapshot's Allocatable,
// and those it lists later join them.
func TestAllocatableRemembered(t *testing.T) {
	srv := startServer(t)
	srv.SetAllocatable(&v1.ContainerDevices{ResourceName: gpu, DeviceIds: []string{"GPU-b", "GPU-a"}})
	c, _ := newClient(t, srv.Socket, 5*time.Second)
	c.Refresh()

	srv.SetAllocatable()
	c.Refresh()
	assert.Equal(t, []Device{{Resource: gpu, IDs: []string{"GPU-a", "GPU-b"}}}, c.Snapshot().Allocatable)

	srv.SetAllocatable(&v1.ContainerDevices{ResourceName: gpu, DeviceIds: []string{"GPU-c"}}, &v1.ContainerDevices{ResourceName: "amd.com/gpu", DeviceIds: []string{"0000:c1:00.0"}})
	c.Refresh()
	assert.Equal(t, []Device{{Resource: "amd.com/gpu", IDs: []string{"0000:c1:00.0"}}, {Resource: gpu, IDs: []string{"GPU-a", "GPU-b", "GPU-c"}}}, c.Snapshot().Allocatable)
}

// TestDynamicResources: DRA claims are read beside the device plugins' devices, a device with
// the CDI devices the kubelet lists with it; a claim resource that names no device (another kind
// of resource, should DRA allocate any) is left out, and a claim left without devices too.
func TestDynamicResources(t *testing.T) {
	srv := startServer(t)
	gpus := podresourcestest.NvidiaClaim{
		UID: "0b5e", Namespace: "team-a", Name: "train-gpus", Pool: "node-1",
		Devices: []podresourcestest.NvidiaDevice{{Minor: 4}, {Minor: 5, MIG: &podresourcestest.MIGInstance{GI: 1, CI: 0}, ShareID: "s-1"}},
	}
	other := &v1.DynamicResource{ClaimName: "scratch", ClaimNamespace: "team-a", ClaimResources: []*v1.ClaimResource{{DriverName: "example.com/memory", PoolName: "node-1"}}}
	srv.SetPods(
		podresourcestest.Pod("team-a", "train-0",
			podresourcestest.WithClaims(podresourcestest.Container("main", gpu, "GPU-a"), gpus.Resource(), other),
			podresourcestest.Container("sidecar", ""),
		),
	)
	c, _ := newClient(t, srv.Socket, 5*time.Second)

	c.Refresh()
	snap := c.Snapshot()
	require.NotNil(t, snap)
	main := ContainerKey{PodKey{"team-a", "train-0"}, "main"}
	assert.Equal(t, map[ContainerKey][]Device{main: {{Resource: gpu, IDs: []string{"GPU-a"}}}}, snap.Devices)
	assert.Equal(t, map[ContainerKey][]Claim{main: {{
		Namespace: "team-a", Name: "train-gpus",
		Devices: []ClaimDevice{
			{Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-4", CDIDevices: []string{"k8s.gpu.nvidia.com/claim=0b5e-gpu-4"}},
			{Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-5-mig-1g10gb-19-1", CDIDevices: []string{"k8s.gpu.nvidia.com/claim=0b5e-gpu-4", "k8s.gpu.nvidia.com/claim=0b5e-gpu-5-mig-1g10gb-19-1"}},
		},
	}}}, snap.Claims, "only devices, and the kubelet's CDI devices as it lists them")
}

// TestUnavailable: a socket that is missing, refuses, or hangs costs a failed refresh and one
// log line; the last answer is kept (its caller judges how long to trust it) and Answering says
// the latest refresh failed; the client recovers when the kubelet is back.
func TestUnavailable(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		c, logs := newClient(t, socketPath(t), 5*time.Second)
		c.Refresh()
		c.Refresh()
		assert.Nil(t, c.Snapshot())
		assert.False(t, c.Answering())
		assert.False(t, c.Seen(), "no socket, no answer: no kubelet on this node")
		assert.EqualValues(t, 2, c.Failures())
		assert.Equal(t, 1, logs.FilterMessageSnippet("GPU allocations come from the other sources").Len(), "one log line, not one per refresh")
		assert.Equal(t, zapcore.InfoLevel, logs.All()[0].Level, "no socket is not a fault: not every node is a kubelet node")
		assert.Empty(t, grpcWarnings.String(), "no gRPC channel is left reconnecting (and logging) between refreshes")
	})
	t.Run("refusing", func(t *testing.T) {
		// A socket file nobody listens on, as a kubelet that died leaves it.
		socket := socketPath(t)
		l, err := net.Listen("unix", socket)
		require.NoError(t, err)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, l.Close())
		c, logs := newClient(t, socket, 5*time.Second)
		c.Refresh()
		assert.Nil(t, c.Snapshot())
		assert.True(t, c.Seen(), "a socket nobody listens on: a kubelet that is down")
		assert.EqualValues(t, 1, c.Failures())
		assert.Equal(t, 1, logs.FilterMessageSnippet("does not answer").Len())
		assert.Equal(t, zapcore.WarnLevel, logs.All()[0].Level)
		assert.Empty(t, grpcWarnings.String(), "no gRPC channel is left reconnecting (and logging) between refreshes")
	})
	t.Run("hanging then back", func(t *testing.T) {
		srv := startServer(t)
		srv.SetPods(podresourcestest.Pod("ns", "p", podresourcestest.Container("c", gpu, "GPU-a")))
		c, logs := newClient(t, srv.Socket, 50*time.Millisecond)
		c.Refresh()
		require.NotNil(t, c.Snapshot())

		last := c.Snapshot()
		srv.Hang(true)
		c.Refresh() // returns at the timeout
		assert.Same(t, last, c.Snapshot(), "the last answer is kept")
		assert.False(t, c.Answering())
		assert.EqualValues(t, 1, c.Failures())
		assert.Equal(t, 1, logs.FilterMessageSnippet("does not answer").Len())

		srv.Hang(false)
		c.Refresh()
		assert.NotSame(t, last, c.Snapshot())
		assert.True(t, c.Answering())
		assert.Len(t, c.Snapshot().Devices, 1)
		assert.Equal(t, 1, logs.FilterMessageSnippet("answers again").Len())
	})
}

// TestSharedRefreshesOnItsOwnClock: components that share a socket share one client, and the
// kubelet is called once per tick of the refresh clock, however often the cache is read.
func TestSharedRefreshesOnItsOwnClock(t *testing.T) {
	srv := startServer(t)
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	set := Settings{Socket: srv.Socket, RefreshInterval: 10 * time.Second, Timeout: 5 * time.Second, Logger: zap.NewNop(), Clock: clk}
	a, releaseA, err := Shared(set)
	require.NoError(t, err)
	b, releaseB, err := Shared(set)
	require.NoError(t, err)
	assert.Same(t, a, b)

	waitCalls(t, srv, 1) // the refresh at start
	for i := range 5 {
		clk.Advance(set.RefreshInterval)
		for range 100 {
			a.Snapshot()
			b.Snapshot()
		}
		// A tick is taken when the loop is free: wait for this one's call before the next.
		waitCalls(t, srv, i+2)
	}
	releaseA()
	assert.Equal(t, 1, shared.Len(), "still held by b")
	releaseB()
	assert.Equal(t, 0, shared.Len())
	assert.Equal(t, 6, srv.Calls("List"), "no call after the last release")
}

func waitCalls(t *testing.T, srv *podresourcestest.Server, n int) {
	t.Helper()
	poll.UntilNoError(t, 10*time.Second, fmt.Sprintf("%d List calls", n), func() error {
		if got := srv.Calls("List"); got < n {
			return fmt.Errorf("the kubelet got %d", got)
		}
		return nil
	})
}
