// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpuplugin is a Kubernetes device plugin (k8s.io/kubelet deviceplugin v1beta1) for
// simulated GPUs: it advertises the devices it is given, all healthy, under their extended
// resource names, so that a real kubelet schedules pods on them, allocates device ids and reports
// them over pod-resources exactly as it does for NVIDIA's plugin.
//
// It puts nothing into the containers it allocates to: no NVIDIA_VISIBLE_DEVICES, no device nodes
// (simulated GPUs have none), as NVIDIA's plugin does when it hands devices over through CDI. So a
// node agent finds an allocation only where the kubelet keeps it, in pod-resources.
//
// Like NVIDIA's plugin it survives a kubelet restart: the kubelet removes every plugin socket
// when it starts, so when its registration socket is created anew the plugin serves again and
// registers again.
package gpuplugin // import "github.com/otelcol-gpu/otelcol-gpu/test/realnode/gpuplugin"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Resource is one extended resource the plugin advertises.
type Resource struct {
	// Name is the resource, e.g. nvidia.com/gpu or nvidia.com/mig-3g.20gb.
	Name string
	// IDs are its devices, in the order the plugin prefers to allocate them.
	IDs []string
}

// watchInterval is how often the kubelet's registration socket is looked at. NVIDIA's plugin
// watches it with inotify; a stat every tenth of a second does the same without a dependency.
const watchInterval = 100 * time.Millisecond

// retryInterval paces the attempts after a failed registration.
const retryInterval = time.Second

// registerTimeout bounds a Register call on a kubelet that accepted the connection.
const registerTimeout = 10 * time.Second

// Plugin serves one device-plugin endpoint per resource in the kubelet's device-plugin
// directory, and registers each with the kubelet.
type Plugin struct {
	dir       string
	resources []Resource
	stop      chan struct{}
	done      chan struct{}

	mu            sync.Mutex
	servers       []*grpc.Server
	registrations int
	lastErr       error
}

// Start serves resources in dir (the kubelet's /var/lib/kubelet/device-plugins, as seen from
// here) and registers them whenever the kubelet's registration socket dir/kubelet.sock is new:
// at once if the kubelet is up, else as soon as it is.
func Start(dir string, resources ...Resource) (*Plugin, error) {
	if len(resources) == 0 {
		return nil, errors.New("gpuplugin: no resource to advertise")
	}
	for _, r := range resources {
		if !strings.Contains(r.Name, "/") || len(r.IDs) == 0 {
			return nil, fmt.Errorf("gpuplugin: resource %q needs a domain-qualified name and at least one device", r.Name)
		}
	}
	p := &Plugin{dir: dir, resources: resources, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// Stop stops serving and removes the plugin's sockets. The kubelet then marks the devices
// unhealthy, as it does when a real plugin exits.
func (p *Plugin) Stop() {
	close(p.stop)
	<-p.done
}

// Registrations is how many times the plugin has registered all its resources: once per kubelet
// start it has seen.
func (p *Plugin) Registrations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registrations
}

// Err is the last failure to serve or register, nil once registration succeeded again.
func (p *Plugin) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func (p *Plugin) run() {
	defer close(p.done)
	defer p.shutdownServers()
	kubelet := filepath.Join(p.dir, filepath.Base(pluginapi.KubeletSocket))
	var registeredWith os.FileInfo // the kubelet socket the current registration went to
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		wait := tick.C
		if fi, err := os.Stat(kubelet); err == nil && (registeredWith == nil || p.kubeletRestarted(fi, registeredWith)) {
			err := p.serveAndRegister(kubelet)
			p.mu.Lock()
			p.lastErr = err
			if err == nil {
				p.registrations++
				registeredWith = fi
			}
			p.mu.Unlock()
			if err != nil {
				// A kubelet that is still starting refuses for a moment; try again unhurried.
				wait = time.After(retryInterval)
			}
		}
		select {
		case <-p.stop:
			return
		case <-wait:
		}
	}
}

// kubeletRestarted tells a kubelet that started since the plugin registered: its socket is
// another file (a new inode may reuse the old number, but not its time), or it has removed the
// plugin's sockets, as a kubelet does when it starts.
func (p *Plugin) kubeletRestarted(now, registeredWith os.FileInfo) bool {
	if !os.SameFile(now, registeredWith) || !now.ModTime().Equal(registeredWith.ModTime()) {
		return true
	}
	for i := range p.resources {
		if _, err := os.Stat(filepath.Join(p.dir, socketName(i))); err != nil {
			return true
		}
	}
	return false
}

// serveAndRegister (re)starts an endpoint per resource on a fresh socket and registers it: a
// kubelet that restarted has removed the old sockets.
func (p *Plugin) serveAndRegister(kubelet string) error {
	p.shutdownServers()
	for i, r := range p.resources {
		endpoint := socketName(i)
		path := filepath.Join(p.dir, endpoint)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return fmt.Errorf("serve %s: %w", r.Name, err)
		}
		srv := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(srv, &endpointServer{resource: r, stop: p.stop})
		p.mu.Lock()
		p.servers = append(p.servers, srv)
		p.mu.Unlock()
		go func() { _ = srv.Serve(l) }()
		if err := register(kubelet, endpoint, r.Name); err != nil {
			return fmt.Errorf("register %s: %w", r.Name, err)
		}
	}
	return nil
}

func (p *Plugin) shutdownServers() {
	p.mu.Lock()
	servers := p.servers
	p.servers = nil
	p.mu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	for i := range p.resources {
		_ = os.Remove(filepath.Join(p.dir, socketName(i)))
	}
}

// socketName is the file name of the i-th resource's endpoint in the device-plugin directory:
// short, since a unix socket's path has room for 107 bytes only.
func socketName(i int) string {
	return fmt.Sprintf("simulated-gpu-%d.sock", i)
}

func register(kubelet, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: resource,
		Options:      options(),
	})
	return err
}

func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// endpointServer serves one resource.
type endpointServer struct {
	pluginapi.UnimplementedDevicePluginServer
	resource Resource
	stop     <-chan struct{}
}

func (*endpointServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

// ListAndWatch sends the devices once: simulated GPUs never change health.
func (s *endpointServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	devices := make([]*pluginapi.Device, 0, len(s.resource.IDs))
	for _, id := range s.resource.IDs {
		devices = append(devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
	case <-s.stop:
	}
	return nil
}

// GetPreferredAllocation prefers the devices in the resource's order: the ones that must be
// included, then the first available ones. With whole GPUs listed before time-slicing replicas,
// a pod is given whole GPUs while there are any.
func (s *endpointServer) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		chosen := slices.Clone(c.MustIncludeDeviceIDs)
		for _, id := range s.resource.IDs {
			if len(chosen) >= int(c.AllocationSize) {
				break
			}
			if slices.Contains(c.AvailableDeviceIDs, id) && !slices.Contains(chosen, id) {
				chosen = append(chosen, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return resp, nil
}

// Allocate accepts the plugin's own devices and sets nothing in the container.
func (s *endpointServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !slices.Contains(s.resource.IDs, id) {
				return nil, fmt.Errorf("%s has no device %q", s.resource.Name, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp, nil
}

func (*endpointServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
