// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package podlogs names pods and containers from the kubelet's log layout, read-only, with no
// socket and no API-server client:
//
//	/var/log/pods/<namespace>_<pod name>_<pod uid>/<container name>/<restart>.log
//	/var/log/containers/<pod name>_<namespace>_<container name>-<container id>.log -> the file above
//
// The cgroup path of a process gives its pod UID and container id but no names; the kubelet's
// pod-resources API gives names but no UID or id. This layout joins the two. It is the least
// privileged bridge a node agent has: the container runtime's CRI socket knows more (pod labels
// and annotations) but is root-equivalent, and an API-server client would double the agent.
package podlogs // import "github.com/otelcol-gpu/otelcol-gpu/internal/podlogs"

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
)

// Pod is a pod the kubelet keeps logs for.
type Pod struct {
	Namespace, Name, UID string
}

// Container is a container of a pod, by its runtime id.
type Container struct {
	Pod  Pod
	Name string
}

// Index is one reading of the layout.
type Index struct {
	// present tells whether the node has the layout at all (a kubelet node with /var/log mounted).
	present    bool
	pods       map[string]Pod       // by pod UID
	containers map[string]Container // by container id
	// single are pods whose log directory holds exactly one container and no link names it: the
	// kubelet has not written that container's link yet, so an app container of the pod whose
	// id no link knows is that one. Only app containers may be named so: the pod's sandbox has
	// no logs at all, and would take the name too.
	single map[string]string
}

// Present tells whether the node has the kubelet's log layout: without it, a pod missing from
// the index says nothing about the pod.
func (ix *Index) Present() bool { return ix.present }

// PodByUID names the pod with this UID.
func (ix *Index) PodByUID(uid string) (Pod, bool) {
	p, ok := ix.pods[uid]
	return p, ok
}

// ContainerName is the name of app container id in pod uid, "" when the layout does not tell.
// The caller must know that id is an app container, not the pod's sandbox (see single).
func (ix *Index) ContainerName(podUID, id string) string {
	if c, ok := ix.containers[id]; ok {
		if c.Pod.UID != podUID {
			return ""
		}
		return c.Name
	}
	return ix.single[podUID]
}

// Empty is the index of a node without the layout.
func Empty() *Index { return newIndex() }

func newIndex() *Index {
	return &Index{pods: map[string]Pod{}, containers: map[string]Container{}, single: map[string]string{}}
}

// Read reads the layout under root (the host's /). Missing directories are an empty index (a
// node that is not a kubelet node); an entry that does not follow the layout is skipped.
func Read(root string) (*Index, error) {
	ix := newIndex()
	podsDir := filepath.Join(root, "var", "log", "pods")
	entries, err := os.ReadDir(podsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ix.present = err == nil
	for _, e := range entries {
		p, ok := ParsePodDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		ix.pods[p.UID] = p
		if ctrs, readErr := os.ReadDir(filepath.Join(podsDir, e.Name())); readErr == nil {
			var dirs []string
			for _, c := range ctrs {
				if c.IsDir() {
					dirs = append(dirs, c.Name())
				}
			}
			if len(dirs) == 1 {
				ix.single[p.UID] = dirs[0]
			}
		}
	}
	linksDir := filepath.Join(root, "var", "log", "containers")
	links, err := os.ReadDir(linksDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, l := range links {
		target, err := os.Readlink(filepath.Join(linksDir, l.Name()))
		if err != nil {
			continue
		}
		c, id, ok := ParseContainerLink(l.Name(), target)
		if !ok {
			continue
		}
		ix.containers[id] = c
		if ix.single[c.Pod.UID] == c.Name {
			// The pod's only container has its link: another id in the pod is not that container.
			delete(ix.single, c.Pod.UID)
		}
		if _, known := ix.pods[c.Pod.UID]; !known {
			ix.pods[c.Pod.UID] = c.Pod
		}
	}
	return ix, nil
}

// ParsePodDir reads "<namespace>_<pod name>_<pod uid>". Kubernetes names cannot hold "_".
func ParsePodDir(name string) (Pod, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Pod{}, false
	}
	return Pod{Namespace: parts[0], Name: parts[1], UID: parts[2]}, true
}

// ParseContainerLink reads a /var/log/containers link: its name
// "<pod>_<namespace>_<container>-<id>.log" gives the id, its target
// ".../pods/<namespace>_<pod>_<uid>/<container>/<n>.log" the pod UID; both must agree on the names.
func ParseContainerLink(name, target string) (Container, string, bool) {
	base, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return Container{}, "", false
	}
	parts := strings.Split(base, "_")
	if len(parts) != 3 {
		return Container{}, "", false
	}
	dash := strings.LastIndexByte(parts[2], '-')
	if dash <= 0 || dash == len(parts[2])-1 {
		return Container{}, "", false
	}
	podName, namespace, container, id := parts[0], parts[1], parts[2][:dash], parts[2][dash+1:]
	target = filepath.ToSlash(target)
	dir := filepath.ToSlash(filepath.Dir(target))            // .../pods/<ns>_<pod>_<uid>/<container>
	pod, ok := ParsePodDir(filepath.Base(filepath.Dir(dir))) // <ns>_<pod>_<uid>
	if !ok || pod.Namespace != namespace || pod.Name != podName || filepath.Base(dir) != container {
		return Container{}, "", false
	}
	return Container{Pod: pod, Name: container}, id, true
}

// Cache re-reads the layout at most once per maxAge, for every component that asks.
type Cache struct {
	root   string
	maxAge time.Duration
	clock  clock.Clock

	mu   sync.Mutex
	at   time.Time
	last *Index
	err  error
}

// Get is the current index; a read that fails keeps the previous one and returns the error.
func (c *Cache) Get() (*Index, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.last != nil && now.Sub(c.at) < c.maxAge {
		return c.last, c.err
	}
	ix, err := Read(c.root)
	c.at, c.err = now, err
	if err == nil {
		c.last = ix
	} else if c.last == nil {
		c.last = newIndex()
	}
	return c.last, c.err
}

var shared sharedcomponent.Registry[string, *Cache]

// MaxAge is how old the shared index may be: a new pod is named within it. A reading is two
// directory listings and one link per container, so it can be short.
const MaxAge = 5 * time.Second

// Shared returns the collector's cache of root's layout and what gives it back.
func Shared(root string) (*Cache, func()) {
	c, release := shared.Acquire(filepath.Clean(root), func() *Cache {
		return &Cache{root: root, maxAge: MaxAge, clock: clock.Real{}}
	})
	return c, func() { release() }
}
