// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package draplugin is a DRA driver (dynamic resource allocation, resource.k8s.io/v1) for
// simulated GPUs, for the real-node tests: it publishes the GPUs it is given in a ResourceSlice
// of the node, as NVIDIA's DRA driver does (devices gpu-<minor>, attributes uuid and minor), and
// serves the kubelet's DRA plugin API (k8s.io/kubelet dra v1): to prepare a claim it writes a CDI
// spec of the claim's devices, each injecting its /dev/nvidia<minor>, and answers with their CDI
// device names, which the kubelet then lists in pod-resources' dynamic_resources.
//
// It is written against the kubelet's gRPC APIs (plugin registration v1 and dra v1 of
// k8s.io/kubelet, which the module already requires) rather than
// k8s.io/dynamic-resource-allocation's kubeletplugin helper: the helper would add that module and
// its dependencies to the repository's go.mod for a test, and what it does beyond these two
// services (ResourceSlice controller, claim informers, health streams) is not what is tested.
//
// The simulated GPUs have no device nodes, and containerd 1.6 injects no CDI devices: a pod's
// container starts without them. What the node agent joins on are the node's files: the CDI spec
// (in the node's /var/run/cdi) and the NVIDIA driver's /proc/driver/nvidia files that the test
// lays out for the same GPUs.
package draplugin // import "github.com/otelcol-gpu/otelcol-gpu/test/realnode/draplugin"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// CDIKind is the kind of the CDI devices the driver hands out, NVIDIA's DRA driver's.
const CDIKind = "k8s.gpu.nvidia.com/claim"

// GPU is one simulated GPU the driver publishes.
type GPU struct {
	UUID  string
	Minor int // /dev/nvidia<Minor>
}

// DeviceName is a GPU's device name in the ResourceSlice, as NVIDIA's DRA driver names it.
func (g GPU) DeviceName() string { return "gpu-" + strconv.Itoa(g.Minor) }

// Config is where the driver runs.
type Config struct {
	// Driver is the DRA driver's name, e.g. gpu.nvidia.com.
	Driver   string
	NodeName string
	GPUs     []GPU
	Client   kubernetes.Interface
	// KubeletDir is the kubelet's /var/lib/kubelet as seen from here; the kubelet's own path of
	// it is /var/lib/kubelet.
	KubeletDir string
	// CDIDir is the node's /var/run/cdi as seen from here.
	CDIDir string
}

// republishInterval: the kubelet deletes its node's ResourceSlices when it starts (before its
// plugins register again); a driver publishes them again.
const republishInterval = time.Second

// Plugin is a running driver.
type Plugin struct {
	drapb.UnimplementedDRAPluginServer

	cfg     Config
	servers []*grpc.Server
	sockets []string
	cancel  context.CancelFunc
	done    chan struct{}

	mu            sync.Mutex
	prepared      map[string]int // calls of NodePrepareResources by claim UID
	registrations int
	lastErr       error
}

// Start publishes the ResourceSlice and serves the kubelet's plugin registration and DRA APIs.
func Start(cfg Config) (*Plugin, error) {
	if cfg.Driver == "" || cfg.NodeName == "" || len(cfg.GPUs) == 0 || cfg.Client == nil {
		return nil, errors.New("draplugin: a driver, a node, GPUs and a client are needed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Plugin{cfg: cfg, cancel: cancel, done: make(chan struct{}), prepared: map[string]int{}}
	if err := os.MkdirAll(cfg.CDIDir, 0o755); err != nil {
		cancel()
		return nil, err
	}
	// The DRA service, where the registration says; then the registration socket, which the
	// kubelet's plugin watcher finds.
	endpoint := filepath.Join("plugins", cfg.Driver, "dra.sock")
	dra := grpc.NewServer()
	drapb.RegisterDRAPluginServer(dra, p)
	reg := grpc.NewServer()
	registerapi.RegisterRegistrationServer(reg, &registration{plugin: p, endpoint: filepath.Join("/var/lib/kubelet", endpoint)})
	for _, s := range []struct {
		path   string
		server *grpc.Server
	}{
		{filepath.Join(cfg.KubeletDir, endpoint), dra},
		{filepath.Join(cfg.KubeletDir, "plugins_registry", cfg.Driver+"-reg.sock"), reg},
	} {
		if err := p.serve(s.path, s.server); err != nil {
			cancel()
			p.stopServers()
			return nil, err
		}
	}
	go p.publish(ctx)
	return p, nil
}

func (p *Plugin) serve(path string, server *grpc.Server) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	_ = os.Remove(path)
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "unix", path)
	if err != nil {
		return err
	}
	p.servers = append(p.servers, server)
	p.sockets = append(p.sockets, path)
	go func() { _ = server.Serve(l) }()
	return nil
}

// Stop stops serving, removes the sockets and the ResourceSlice, and the CDI specs it wrote.
func (p *Plugin) Stop() error {
	p.cancel()
	<-p.done
	p.stopServers()
	err := p.cfg.Client.ResourceV1().ResourceSlices().Delete(context.Background(), p.sliceName(), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	specs, _ := filepath.Glob(filepath.Join(p.cfg.CDIDir, "k8s.gpu.nvidia.com-claim_*.json"))
	for _, f := range specs {
		err = errors.Join(err, os.Remove(f))
	}
	return err
}

func (p *Plugin) stopServers() {
	for _, s := range p.servers {
		s.Stop()
	}
	for _, path := range p.sockets {
		_ = os.Remove(path)
	}
}

// Prepared is how many times the kubelet asked to prepare the claim with uid.
func (p *Plugin) Prepared(uid string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prepared[uid]
}

// Registrations is how many times the kubelet registered the driver: once per kubelet start.
func (p *Plugin) Registrations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registrations
}

// Err is the last failure to publish the ResourceSlice or to prepare a claim.
func (p *Plugin) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func (p *Plugin) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
}

func (p *Plugin) sliceName() string { return p.cfg.NodeName + "-" + p.cfg.Driver }

// publish keeps the node's ResourceSlice in the API: created, and created again after the
// kubelet deleted it.
func (p *Plugin) publish(ctx context.Context) {
	defer close(p.done)
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.sliceName()},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   p.cfg.Driver,
			NodeName: &p.cfg.NodeName,
			Pool:     resourcev1.ResourcePool{Name: p.cfg.NodeName, ResourceSliceCount: 1},
		},
	}
	for _, g := range p.cfg.GPUs {
		uuid, minor := g.UUID, int64(g.Minor)
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name: g.DeviceName(),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":  {StringValue: new("gpu")},
				"uuid":  {StringValue: &uuid},
				"minor": {IntValue: &minor},
			},
		})
	}
	tick := time.NewTicker(republishInterval)
	defer tick.Stop()
	for {
		slices := p.cfg.Client.ResourceV1().ResourceSlices()
		_, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// A new generation each time, as a driver does when it publishes its pool anew.
			slice.Spec.Pool.Generation++
			_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			p.setErr(fmt.Errorf("publishing ResourceSlice %s: %w", slice.Name, err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// NodePrepareResources writes a CDI spec for each claim's devices of this driver and answers
// with their CDI device names.
func (p *Plugin) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		devices, err := p.prepare(ctx, c)
		if err != nil {
			p.setErr(err)
			resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
			continue
		}
		p.mu.Lock()
		p.prepared[c.Uid]++
		p.mu.Unlock()
		resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Devices: devices}
	}
	return resp, nil
}

func (p *Plugin) prepare(ctx context.Context, c *drapb.Claim) ([]*drapb.Device, error) {
	claim, err := p.cfg.Client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	if string(claim.UID) != c.Uid || claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s: not the allocated claim %s", c.Namespace, c.Name, c.Uid)
	}
	type cdiDevice struct {
		Name  string `json:"name"`
		Edits struct {
			DeviceNodes []map[string]string `json:"deviceNodes"`
		} `json:"containerEdits"`
	}
	spec := struct {
		Version string      `json:"cdiVersion"`
		Kind    string      `json:"kind"`
		Devices []cdiDevice `json:"devices"`
	}{Version: "0.6.0", Kind: CDIKind}
	var out []*drapb.Device
	for i := range claim.Status.Allocation.Devices.Results {
		r := &claim.Status.Allocation.Devices.Results[i]
		if r.Driver != p.cfg.Driver {
			continue
		}
		var gpu *GPU
		for j := range p.cfg.GPUs {
			if p.cfg.GPUs[j].DeviceName() == r.Device {
				gpu = &p.cfg.GPUs[j]
			}
		}
		if gpu == nil || r.Pool != p.cfg.NodeName {
			return nil, fmt.Errorf("claim %s/%s: device %s/%s is not this node's", c.Namespace, c.Name, r.Pool, r.Device)
		}
		d := cdiDevice{Name: c.Uid + "-" + r.Device}
		d.Edits.DeviceNodes = []map[string]string{{"path": "/dev/nvidia" + strconv.Itoa(gpu.Minor)}}
		spec.Devices = append(spec.Devices, d)
		out = append(out, &drapb.Device{
			RequestNames: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CdiDeviceIds: []string{CDIKind + "=" + d.Name},
		})
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	//nolint:gosec // G306: CDI specs are world-readable, as runtimes and NVIDIA's driver leave them
	if err := os.WriteFile(p.specPath(c.Uid), data, 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

// NodeUnprepareResources removes the claims' CDI specs.
func (p *Plugin) NodeUnprepareResources(_ context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		r := &drapb.NodeUnprepareResourceResponse{}
		if err := os.Remove(p.specPath(c.Uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.Error = err.Error()
		}
		resp.Claims[c.Uid] = r
	}
	return resp, nil
}

// specPath is a claim's CDI spec, named as NVIDIA's DRA driver names it.
func (p *Plugin) specPath(uid string) string {
	return filepath.Join(p.cfg.CDIDir, "k8s.gpu.nvidia.com-claim_"+uid+".json")
}

// registration answers the kubelet's plugin watcher.
type registration struct {
	registerapi.UnimplementedRegistrationServer

	plugin   *Plugin
	endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: r.plugin.cfg.Driver, Endpoint: r.endpoint, SupportedVersions: []string{drapb.DRAPluginService}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		err := fmt.Errorf("the kubelet did not register the plugin: %s", s.Error)
		r.plugin.setErr(err)
		return nil, err
	}
	r.plugin.mu.Lock()
	r.plugin.registrations++
	r.plugin.mu.Unlock()
	return &registerapi.RegistrationStatusResponse{}, nil
}
