// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The condition types Kubernetes itself sets. OpenPAI counted any other type as an error
// (process_error_log_total{type="unknown_pod_cond"|"unknown_node_cond"}); the set here is the
// one current Kubernetes uses, so a healthy v1.34 cluster does not count errors on every pod.
var (
	knownPodConditions = map[corev1.PodConditionType]bool{
		corev1.PodScheduled:              true,
		corev1.PodInitialized:            true,
		corev1.PodReady:                  true,
		corev1.ContainersReady:           true,
		corev1.PodReadyToStartContainers: true,
		corev1.DisruptionTarget:          true,
		corev1.PodResizePending:          true,
		corev1.PodResizeInProgress:       true,
	}
	knownNodeConditions = map[corev1.NodeConditionType]bool{
		corev1.NodeReady:              true,
		corev1.NodeMemoryPressure:     true,
		corev1.NodeDiskPressure:       true,
		corev1.NodePIDPressure:        true,
		corev1.NodeNetworkUnavailable: true,
	}
)

const unknown = "unknown"

// lower renders a status or phase the way OpenPAI's labels did: lower-cased, "unknown" when empty.
func lower[T ~string](s T) string {
	if s == "" {
		return unknown
	}
	return strings.ToLower(string(s))
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return lower(c.Status)
		}
	}
	return unknown
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) string {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return lower(c.Status)
		}
	}
	return unknown
}

// podHostIP is status.hostIP, "unscheduled" before the kubelet has reported one (OpenPAI's value).
func podHostIP(p *corev1.Pod) string {
	if p.Status.HostIP == "" {
		return "unscheduled"
	}
	return p.Status.HostIP
}

// nodeHostIP is the node's InternalIP, else its name, as OpenPAI's watchdog did.
func nodeHostIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return n.Name
}

// containerState is the kind of a container's state and the reason Kubernetes gave for it.
// A state with none of its fields set (the kubelet has not reported yet) is "unknown".
func containerState(s corev1.ContainerState) (kind, reason string) {
	switch {
	case s.Running != nil:
		return "running", ""
	case s.Waiting != nil:
		return "waiting", s.Waiting.Reason
	case s.Terminated != nil:
		return "terminated", s.Terminated.Reason
	}
	return unknown, ""
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// jobName returns the pod's job name from the first source that has one.
func jobName(p *corev1.Pod, sources []JobNameSource) string {
	for _, src := range sources {
		switch {
		case src.Label != "":
			if v := p.Labels[src.Label]; v != "" {
				return v
			}
		case src.Annotation != "":
			if v := p.Annotations[src.Annotation]; v != "" {
				return v
			}
		default:
			for i := range p.Spec.Containers {
				c := &p.Spec.Containers[i]
				for _, e := range c.Env {
					if e.Name == src.Env && e.Value != "" {
						return e.Value
					}
				}
			}
		}
	}
	return ""
}

// finished pods hold no resources: the scheduler does not count them either.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podGPUs is how many GPUs a pod holds, counted as the scheduler counts a pod's requests
// (k8s.io/component-helpers/resource.PodRequests): the sum over its containers, plus its
// restartable (sidecar) init containers, or the largest one-shot init container plus the
// sidecars started before it, whichever is larger. OpenPAI kept only the last container's value.
func podGPUs(p *corev1.Pod, names []string) int64 {
	var sum int64
	for i := range p.Spec.Containers {
		sum += containerGPUs(&p.Spec.Containers[i], names)
	}
	var sidecars, initMax int64
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		v := containerGPUs(c, names)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += v
			sidecars += v
			v = sidecars
		} else {
			v += sidecars
		}
		initMax = max(initMax, v)
	}
	return max(sum, initMax)
}

// containerGPUs takes the larger of request and limit: for extended resources the API server
// requires them equal and defaults the request to the limit, but objects that never went through
// defaulting (tests, some controllers' caches) may carry only the limit.
func containerGPUs(c *corev1.Container, names []string) int64 {
	var n int64
	for _, name := range names {
		rn := corev1.ResourceName(name)
		req, lim := c.Resources.Requests[rn], c.Resources.Limits[rn]
		n += max(req.Value(), lim.Value())
	}
	return n
}

// nodeGPUs is what the node offers: allocatable, or capacity when the node reports no
// allocatable at all (old kubelets), as OpenPAI's watchdog did.
func nodeGPUs(n *corev1.Node, names []string) int64 {
	rl := n.Status.Allocatable
	if rl == nil {
		rl = n.Status.Capacity
	}
	var total int64
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		total += q.Value()
	}
	return total
}
