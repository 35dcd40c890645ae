// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package cgroupfs finds containers in a cgroup tree (v1 or v2, cgroupfs or systemd driver) and
// names them from their cgroup path: runtime, container id and pod UID, whatever the pod's
// Kubernetes QoS class (Guaranteed pods sit directly under kubepods, the others in a sub-tree).
// Both the task receiver (which walks the tree) and GPU attribution (which maps a process's
// /proc/<pid>/cgroup to a container) use it, so a layout is recognized in one place only.
package cgroupfs // import "github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"

import (
	"path"
	"strings"
)

// Container is what a cgroup path tells about the container that owns it.
type Container struct {
	// ID is the runtime's container id (64 hex characters).
	ID string
	// Runtime is "docker", "containerd" or "cri-o" when the path says so, else "".
	Runtime string
	// PodUID is the Kubernetes pod UID, "" for a container outside Kubernetes.
	PodUID string
}

// IsPodSandbox tells a pod's sandbox from its app containers by the command of a process in it:
// the sandbox's pause process holds the pod's namespaces and runs nothing else. containerd
// starts one for every pod, cri-o when the pod shares its PID namespace (or with
// drop_infra_ctr off). A sandbox is never a task, has no logs in the kubelet's layout, and so
// must never be named after the pod's app container.
func (c Container) IsPodSandbox(comm string) bool { return c.PodUID != "" && comm == "pause" }

// systemd scope prefixes of container runtimes; a conmon scope (cri-o's monitor) is not a container.
var scopePrefixes = []struct{ prefix, runtime string }{
	{"cri-containerd-", "containerd"},
	{"crio-", "cri-o"},
	{"docker-", "docker"},
}

// ParseContainer recognizes a container's cgroup from its path, relative to the hierarchy root
// (as in /proc/<pid>/cgroup). The last path element must be the container; a path inside a
// container (a nested cgroup) is not one.
func ParseContainer(cgroupPath string) (Container, bool) {
	cgroupPath = strings.TrimSuffix(cgroupPath, "/")
	dir, leaf := path.Split(cgroupPath)
	if c, ok := parseSystemdNotation(leaf); ok {
		return c, true
	}
	c, ok := parseLeaf(leaf)
	if !ok {
		return Container{}, false
	}
	parent := path.Base(strings.TrimSuffix(dir, "/"))
	if uid, ok := parsePodElement(parent); ok {
		c.PodUID = uid
		return c, true
	}
	// Outside Kubernetes only layouts that certainly name a container count: docker's own
	// cgroupfs parent and runtime scopes under systemd.
	if c.Runtime != "" {
		return c, true
	}
	if parent == "docker" {
		c.Runtime = "docker"
		return c, true
	}
	return Container{}, false
}

// ContainerOf returns the container that owns a cgroup: the one at cgroupPath, else its nearest
// ancestor that is a container. A process may sit in a cgroup of its own below its container's
// (kube-proxy makes one; so does systemd or a nested runtime inside a container); it still belongs
// to that container.
func ContainerOf(cgroupPath string) (Container, bool) {
	for p := strings.TrimSuffix(cgroupPath, "/"); p != "" && p != "/" && p != "."; p = path.Dir(p) {
		if c, ok := ParseContainer(p); ok {
			return c, true
		}
	}
	return Container{}, false
}

// parseSystemdNotation reads a directory named after the systemd notation of a cgroup,
// "<pod slice>:<runtime prefix>:<id>": runc names it so when the kubelet uses the systemd
// driver and the runtime cgroupfs (a mismatch seen on real nodes).
func parseSystemdNotation(leaf string) (Container, bool) {
	slice, rest, ok := strings.Cut(leaf, ":")
	if !ok {
		return Container{}, false
	}
	prefix, id, ok := strings.Cut(rest, ":")
	if !ok || !isContainerID(id) {
		return Container{}, false
	}
	uid, ok := parsePodElement(slice)
	if !ok {
		return Container{}, false
	}
	for _, p := range scopePrefixes {
		if prefix+"-" == p.prefix {
			return Container{ID: id, Runtime: p.runtime, PodUID: uid}, true
		}
	}
	return Container{}, false
}

func parseLeaf(leaf string) (Container, bool) {
	if id, ok := strings.CutSuffix(leaf, ".scope"); ok {
		for _, p := range scopePrefixes {
			if rest, ok := strings.CutPrefix(id, p.prefix); ok && isContainerID(rest) {
				return Container{ID: rest, Runtime: p.runtime}, true
			}
		}
		return Container{}, false
	}
	if isContainerID(leaf) {
		return Container{ID: leaf}, true
	}
	return Container{}, false
}

// parsePodElement accepts "pod<uid>" (cgroupfs driver) and "kubepods[-<qos>]-pod<uid_with_underscores>.slice"
// (systemd driver, also below a kubelet slice as in "kubelet-kubepods-…") and returns the UID with dashes.
func parsePodElement(elem string) (string, bool) {
	if slice, ok := strings.CutSuffix(elem, ".slice"); ok {
		i := strings.LastIndex(slice, "-pod")
		if i < 0 || !strings.Contains(slice[:i+1], "kubepods") {
			return "", false
		}
		uid := strings.ReplaceAll(slice[i+len("-pod"):], "_", "-")
		return uid, isPodUID(uid)
	}
	uid, ok := strings.CutPrefix(elem, "pod")
	return uid, ok && isPodUID(uid)
}

func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// isPodUID accepts a UUID (the kubelet's form) and static-pod hashes (32 hex characters).
func isPodUID(s string) bool {
	if len(s) == 32 {
		return strings.IndexFunc(s, func(r rune) bool { return r > 0x7f || !isHex(byte(r)) }) < 0
	}
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(b byte) bool {
	return ('0' <= b && b <= '9') || ('a' <= b && b <= 'f')
}
