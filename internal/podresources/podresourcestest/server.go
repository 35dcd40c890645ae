// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package podresourcestest serves the kubelet's pod-resources v1 API on a unix socket, the way
// httptest serves HTTP: a real gRPC server with the kubelet's service, answering what the test
// (or the demo node) sets. It can also hang, to stand for a kubelet that does not answer.
package podresourcestest // import "github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server is a pod-resources server on a unix socket.
type Server struct {
	v1.UnimplementedPodResourcesListerServer

	// Socket is the path it listens on.
	Socket string
	grpc   *grpc.Server
	served chan struct{}

	mu          sync.Mutex
	pods        *v1.ListPodResourcesResponse
	allocatable *v1.AllocatableResourcesResponse
	hang        chan struct{} // non-nil: calls wait on it (or their deadline)
	calls       map[string]int
}

// NewServer listens on socket (its directory is created) and serves until Close.
func NewServer(socket string) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Socket:      socket,
		grpc:        grpc.NewServer(),
		served:      make(chan struct{}),
		pods:        &v1.ListPodResourcesResponse{},
		allocatable: &v1.AllocatableResourcesResponse{},
		calls:       map[string]int{},
	}
	v1.RegisterPodResourcesListerServer(s.grpc, s)
	go func() {
		defer close(s.served)
		_ = s.grpc.Serve(l)
	}()
	return s, nil
}

// Close stops the server at once (a hanging call is released) and removes the socket.
func (s *Server) Close() {
	s.Hang(false)
	s.grpc.Stop()
	<-s.served
	_ = os.Remove(s.Socket)
}

// SetPods sets what List answers.
func (s *Server) SetPods(pods ...*v1.PodResources) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = &v1.ListPodResourcesResponse{PodResources: pods}
}

// SetAllocatable sets what GetAllocatableResources answers.
func (s *Server) SetAllocatable(devices ...*v1.ContainerDevices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocatable = &v1.AllocatableResourcesResponse{Devices: devices}
}

// Hang makes every call wait until its deadline (on) or answer again (off).
func (s *Server) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.hang == nil:
		s.hang = make(chan struct{})
	case !on && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// Calls is how many times each method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *Server) enter(ctx context.Context, method string) error {
	s.mu.Lock()
	s.calls[method]++
	hang := s.hang
	s.mu.Unlock()
	if hang == nil {
		return nil
	}
	select {
	case <-hang:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// List answers the pods set by SetPods.
func (s *Server) List(ctx context.Context, _ *v1.ListPodResourcesRequest) (*v1.ListPodResourcesResponse, error) {
	if err := s.enter(ctx, "List"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.pods).(*v1.ListPodResourcesResponse), nil
}

// GetAllocatableResources answers the devices set by SetAllocatable.
func (s *Server) GetAllocatableResources(ctx context.Context, _ *v1.AllocatableResourcesRequest) (*v1.AllocatableResourcesResponse, error) {
	if err := s.enter(ctx, "GetAllocatableResources"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.allocatable).(*v1.AllocatableResourcesResponse), nil
}

// Pod builds a pod's entry: containers named with their devices of one resource each.
func Pod(namespace, name string, containers ...*v1.ContainerResources) *v1.PodResources {
	return &v1.PodResources{Namespace: namespace, Name: name, Containers: containers}
}

// Container builds a container's entry holding ids of resource (none: a container without devices).
func Container(name, resource string, ids ...string) *v1.ContainerResources {
	c := &v1.ContainerResources{Name: name}
	if len(ids) > 0 {
		c.Devices = []*v1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}}
	}
	return c
}
