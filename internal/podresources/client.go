// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package podresources reads which devices the kubelet gave each container, from the kubelet's
// pod-resources API (k8s.io/kubelet/pkg/apis/podresources/v1) on its unix socket. The kubelet is
// asked on the client's own interval, under a timeout, and the answer is cached: nothing that
// reads the cache (a collection, a scrape) ever waits on the kubelet. One client serves every
// component of a collector that names the same socket (see Shared).
package podresources // import "github.com/otelcol-gpu/otelcol-gpu/internal/podresources"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/refresh"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
)

// DefaultSocket is where the kubelet serves the API, relative to the host's root.
const DefaultSocket = "var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessageBytes bounds one List answer; a node with hundreds of pods stays well below it.
const maxMessageBytes = 16 << 20

// PodKey names a pod the way the API does (it carries no UID).
type PodKey struct{ Namespace, Pod string }

// ContainerKey names a container the way the API does.
type ContainerKey struct {
	PodKey
	Container string
}

// Device is what the kubelet allocated of one extended resource.
type Device struct {
	Resource string
	IDs      []string
}

// Claim is a ResourceClaim the kubelet prepared for a container through dynamic resource
// allocation (DRA): its devices, each named by its driver's triplet and by the CDI devices the
// driver injects for it. A pod that asks for an extended resource which a DRA driver serves
// (Kubernetes 1.37's DRAExtendedResource) has one too, named by the scheduler
// (<pod>-extended-resources-<suffix>), with nothing under the resource in Devices.
type Claim struct {
	Namespace, Name string
	Devices         []ClaimDevice
}

// ClaimDevice is one device of a claim. Driver, Pool and Device name it on the node; no GPU
// UUID comes with it. CDIDevices are fully qualified CDI names (vendor/class=name). The kubelet
// (pkg/kubelet/cm GetDynamicResources, kubernetes 9efa0b0) lists with each device of a claim
// the CDI devices of the driver's devices before it as well: only a claim's union is exact.
type ClaimDevice struct {
	Driver, Pool, Device string
	CDIDevices           []string
}

// Snapshot is one answer of the kubelet.
type Snapshot struct {
	// At is when the kubelet answered.
	At time.Time
	// Pods are every pod the kubelet lists, with or without devices.
	Pods map[PodKey]struct{}
	// Devices are each container's allocated devices; containers without any are absent.
	Devices map[ContainerKey][]Device
	// Claims are each container's DRA claims (dynamic_resources, behind the kubelet's
	// KubeletPodResourcesDynamicResources gate, on by default since 1.34); containers without
	// any are absent.
	Claims map[ContainerKey][]Claim
	// Allocatable are every device the kubelet listed as allocatable in any answer since the
	// client started, by resource, sorted: right after a restart the kubelet lists none until
	// each device plugin registers again, and forgetting them would forget which devices are
	// the kubelet's to hand out.
	Allocatable []Device
}

// Settings of a client.
type Settings struct {
	// Socket is the path of the kubelet's pod-resources socket.
	Socket string
	// RefreshInterval is how often the kubelet is asked: the only rate of calls to it.
	RefreshInterval time.Duration
	// Timeout bounds each call.
	Timeout time.Duration
	Logger  *zap.Logger
	// Clock paces the refreshes and dates the snapshots; nil is the machine's.
	Clock clock.Clock
}

// Client caches the kubelet's pod-resources answers.
type Client struct {
	set  Settings
	loop *refresh.Loop

	mu          sync.RWMutex
	snapshot    *Snapshot
	allocatable map[string]map[string]struct{} // resource -> ids, every answer's
	failing     bool
	// seen: the kubelet answered once, or its socket existed when the client was made or at a
	// failed refresh.
	seen bool

	calls, failures atomic.Int64
	closeOnce       sync.Once
}

// New makes a client; no connection is attempted before Start.
func New(set Settings) (*Client, error) {
	if set.Socket == "" {
		return nil, errors.New("pod-resources socket: no path")
	}
	if set.Logger == nil {
		set.Logger = zap.NewNop()
	}
	set.Clock = clock.OrReal(set.Clock)
	c := &Client{set: set}
	// A socket that is there before the first call is a kubelet's, answering or not.
	_, err := os.Stat(set.Socket)
	c.seen = err == nil
	return c, nil
}

// Start asks the kubelet now and then on every refresh interval, in the background.
func (c *Client) Start() {
	c.loop = refresh.Start(c.set.RefreshInterval, c.set.Clock, c.Refresh)
}

// Close stops the refreshes and the connection; it waits for a refresh under way (bounded by
// the timeout).
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		if c.loop != nil {
			c.loop.Stop()
		}
	})
}

// Snapshot is the kubelet's last answer, however old (Answering tells whether the latest
// refresh got it), or nil before the first: whether an answer is still to be trusted is the
// caller's to judge.
func (c *Client) Snapshot() *Snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.snapshot
}

// Asked tells whether a refresh has run.
func (c *Client) Asked() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.snapshot != nil || c.failing
}

// Answering tells whether the latest refresh got an answer.
func (c *Client) Answering() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.snapshot != nil && !c.failing
}

// Seen tells whether this node has a kubelet: it answered once, or its socket exists (a
// kubelet that stopped, or that does not answer yet). A node without one (make run on a
// workstation) has neither.
func (c *Client) Seen() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.seen
}

// Calls is how many calls were made to the kubelet; Failures how many refreshes failed.
func (c *Client) Calls() int64    { return c.calls.Load() }
func (c *Client) Failures() int64 { return c.failures.Load() }

// Refresh asks the kubelet once: GetAllocatableResources (added to what it listed before) and
// List. A failure keeps the last answer.
func (c *Client) Refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), c.set.Timeout)
	defer cancel()
	snap, err := c.list(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failures.Add(1)
		_, statErr := os.Stat(c.set.Socket)
		missing := errors.Is(statErr, fs.ErrNotExist)
		c.seen = c.seen || !missing
		if !c.failing {
			c.failing = true
			if missing && c.snapshot == nil {
				// Not a Kubernetes node (make run on a workstation), or the socket is not mounted.
				c.set.Logger.Info("No kubelet pod-resources socket: GPU allocations come from the other sources", zap.String("socket", c.set.Socket))
			} else {
				c.set.Logger.Warn("The kubelet's pod-resources API does not answer", zap.String("socket", c.set.Socket), zap.Error(err))
			}
		}
		return
	}
	if c.failing {
		c.failing = false
		c.set.Logger.Info("The kubelet's pod-resources API answers again", zap.String("socket", c.set.Socket))
	}
	c.seen = true
	c.snapshot = snap
}

// connect opens one connection for one refresh. The socket is dialed here, not by gRPC: a
// gRPC channel left open on a missing or dead socket reconnects in the background and logs a
// warning at every attempt, forever (a workstation has no kubelet), where the client's own
// failure path logs once. The connection is closed after the refresh, so nothing runs between
// refreshes.
func (c *Client) connect(ctx context.Context) (*grpc.ClientConn, error) {
	var dialer net.Dialer
	first, err := dialer.DialContext(ctx, "unix", c.set.Socket)
	if err != nil {
		return nil, err
	}
	var handedOver atomic.Bool
	conn, err := grpc.NewClient("passthrough:///kubelet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			if handedOver.CompareAndSwap(false, true) {
				return first, nil
			}
			return dialer.DialContext(ctx, "unix", c.set.Socket)
		}),
	)
	if err != nil {
		first.Close()
		return nil, fmt.Errorf("pod-resources socket %s: %w", c.set.Socket, err)
	}
	return conn, nil
}

func (c *Client) list(ctx context.Context) (*Snapshot, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	lister := v1.NewPodResourcesListerClient(conn)
	// Asked every time: a device plugin registers after the kubelet's start (and after the
	// agent's), and the kubelet answers from memory.
	c.calls.Add(1)
	allocResp, err := lister.GetAllocatableResources(ctx, &v1.AllocatableResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetAllocatableResources: %w", err)
	}
	allocatable := c.addAllocatable(devices(allocResp.GetDevices()))
	c.calls.Add(1)
	resp, err := lister.List(ctx, &v1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("List: %w", err)
	}
	snap := &Snapshot{At: c.set.Clock.Now(), Pods: map[PodKey]struct{}{}, Devices: map[ContainerKey][]Device{}, Claims: map[ContainerKey][]Claim{}, Allocatable: allocatable}
	for _, p := range resp.GetPodResources() {
		if p == nil {
			continue
		}
		pod := PodKey{Namespace: p.GetNamespace(), Pod: p.GetName()}
		if pod.Pod == "" {
			return nil, errors.New("List: a pod without a name")
		}
		snap.Pods[pod] = struct{}{}
		for _, ctr := range p.GetContainers() {
			key := ContainerKey{PodKey: pod, Container: ctr.GetName()}
			if d := devices(ctr.GetDevices()); len(d) > 0 {
				snap.Devices[key] = d
			}
			if cl := claims(ctr.GetDynamicResources()); len(cl) > 0 {
				snap.Claims[key] = cl
			}
		}
	}
	return snap, nil
}

// addAllocatable adds an answer's allocatable devices to those of the earlier answers and
// returns them all.
func (c *Client) addAllocatable(answer []Device) []Device {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allocatable == nil {
		c.allocatable = map[string]map[string]struct{}{}
	}
	for _, d := range answer {
		ids := c.allocatable[d.Resource]
		if ids == nil {
			ids = map[string]struct{}{}
			c.allocatable[d.Resource] = ids
		}
		for _, id := range d.IDs {
			ids[id] = struct{}{}
		}
	}
	all := make([]Device, 0, len(c.allocatable))
	for _, resource := range slices.Sorted(maps.Keys(c.allocatable)) {
		all = append(all, Device{Resource: resource, IDs: slices.Sorted(maps.Keys(c.allocatable[resource]))})
	}
	return all
}

func devices(in []*v1.ContainerDevices) []Device {
	var out []Device
	for _, d := range in {
		if d == nil || len(d.GetDeviceIds()) == 0 {
			continue
		}
		out = append(out, Device{Resource: d.GetResourceName(), IDs: d.GetDeviceIds()})
	}
	return out
}

// claims keeps the claims that name devices: the API leaves device_name empty for other kinds
// of resources, should DRA allocate any.
func claims(in []*v1.DynamicResource) []Claim {
	var out []Claim
	for _, r := range in {
		c := Claim{Namespace: r.GetClaimNamespace(), Name: r.GetClaimName()}
		for _, d := range r.GetClaimResources() {
			if d.GetDeviceName() == "" {
				continue
			}
			cd := ClaimDevice{Driver: d.GetDriverName(), Pool: d.GetPoolName(), Device: d.GetDeviceName()}
			for _, cdi := range d.GetCdiDevices() {
				if cdi.GetName() != "" {
					cd.CDIDevices = append(cd.CDIDevices, cdi.GetName())
				}
			}
			c.Devices = append(c.Devices, cd)
		}
		if len(c.Devices) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// shared holds one started client per socket for the whole collector.
var shared sharedcomponent.Registry[string, *sharedcomponent.Opened[*Client]]

// Shared returns the collector's client for set.Socket, started, and what gives it back; the
// first caller's interval and timeout are the client's (components of one collector name the
// same ones in practice).
func Shared(set Settings) (*Client, func(), error) {
	return sharedcomponent.Open(&shared, set.Socket, func() (*Client, error) {
		c, err := New(set)
		if err != nil {
			return nil, err
		}
		c.Start()
		return c, nil
	})
}
