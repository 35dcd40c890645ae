// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripper keeps, of each pod and node, only the fields the metrics and the status-change logs
// read, before the informer stores it: on a 5,000-pod cluster the full objects (managed fields,
// volumes, probes, images, most of the environment) are most of the receiver's memory.
type stripper struct {
	cfg *Config
	// labels, annotations and env are the keys that identify a service or a job, the only ones
	// the receiver reads; everything else a pod carries is dropped.
	labels, annotations, env map[string]bool
	gpus                     map[corev1.ResourceName]bool
}

func newStripper(cfg *Config) *stripper {
	s := &stripper{
		cfg:         cfg,
		labels:      map[string]bool{cfg.ServiceLabel: true},
		annotations: map[string]bool{},
		env:         map[string]bool{},
		gpus:        map[corev1.ResourceName]bool{},
	}
	for _, src := range cfg.JobNameSources {
		switch {
		case src.Label != "":
			s.labels[src.Label] = true
		case src.Annotation != "":
			s.annotations[src.Annotation] = true
		default:
			s.env[src.Env] = true
		}
	}
	for _, name := range cfg.GPUResourceNames {
		s.gpus[corev1.ResourceName(name)] = true
	}
	return s
}

// transform is the informers' cache.TransformFunc. Anything that is not a pod or a node (the
// informer's DeletedFinalStateUnknown tombstones) is passed through unchanged.
func (s *stripper) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return s.pod(o), nil
	case *corev1.Node:
		return s.node(o), nil
	}
	return obj, nil
}

func (s *stripper) meta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            keep(m.Labels, s.labels),
		Annotations:       keep(m.Annotations, s.annotations),
	}
}

func (s *stripper) pod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: s.meta(&p.ObjectMeta),
		Spec: corev1.PodSpec{
			NodeName:       p.Spec.NodeName,
			InitContainers: s.containers(p.Spec.InitContainers),
			Containers:     s.containers(p.Spec.Containers),
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			Reason:                p.Status.Reason,
			Message:               p.Status.Message,
			HostIP:                p.Status.HostIP,
			Conditions:            conditions(p.Status.Conditions),
			InitContainerStatuses: containerStatuses(p.Status.InitContainerStatuses),
			ContainerStatuses:     containerStatuses(p.Status.ContainerStatuses),
		},
	}
}

func (s *stripper) containers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.Container{
			Name:          c.Name,
			RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{
				Requests: keepResources(c.Resources.Requests, s.gpus),
				Limits:   keepResources(c.Resources.Limits, s.gpus),
			},
		}
		for _, e := range c.Env {
			if s.env[e.Name] && e.Value != "" {
				out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
	}
	return out
}

func conditions(cs []corev1.PodCondition) []corev1.PodCondition {
	if cs == nil {
		return nil
	}
	out := make([]corev1.PodCondition, len(cs))
	for i, c := range cs {
		out[i] = corev1.PodCondition{Type: c.Type, Status: c.Status}
	}
	return out
}

func containerStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if cs == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.ContainerStatus{
			Name:                 c.Name,
			Ready:                c.Ready,
			RestartCount:         c.RestartCount,
			State:                c.State,
			LastTerminationState: corev1.ContainerState{Terminated: c.LastTerminationState.Terminated},
		}
	}
	return out
}

func (s *stripper) node(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{
		ObjectMeta: s.meta(&n.ObjectMeta),
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{
			Capacity:    keepResources(n.Status.Capacity, s.gpus),
			Allocatable: keepResources(n.Status.Allocatable, s.gpus),
		},
	}
	// Allocatable without any GPU resource must stay distinguishable from no allocatable at all,
	// because only the latter falls back to capacity (nodeGPUs).
	if n.Status.Allocatable != nil && out.Status.Allocatable == nil {
		out.Status.Allocatable = corev1.ResourceList{}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out.Status.Addresses = []corev1.NodeAddress{a}
			break
		}
	}
	for _, c := range n.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
		})
	}
	return out
}

func keep(m map[string]string, keys map[string]bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if keys[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func keepResources(rl corev1.ResourceList, names map[corev1.ResourceName]bool) corev1.ResourceList {
	var out corev1.ResourceList
	for k, v := range rl {
		if names[k] {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[k] = v
		}
	}
	return out
}
