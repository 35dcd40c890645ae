// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs // import "github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// Version is the cgroup version a host mounts at /sys/fs/cgroup.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

// DetectVersion tells a unified (v2) hierarchy from a v1 one by what is mounted at mountpoint
// (normally /sys/fs/cgroup): v2 has cgroup.controllers at its root, v1 a directory per controller.
// Hybrid hosts (v1 controllers plus a v2 "unified" directory) count as v1, where the stats are.
func DetectVersion(mountpoint string) (Version, error) {
	if _, err := os.Stat(filepath.Join(mountpoint, "cgroup.controllers")); err == nil {
		return V2, nil
	}
	if fi, err := os.Stat(filepath.Join(mountpoint, "memory")); err == nil && fi.IsDir() {
		return V1, nil
	}
	return 0, fmt.Errorf("no cgroup hierarchy at %s: neither cgroup.controllers (v2) nor a memory controller directory (v1)", mountpoint)
}

// Found is a container cgroup: what its path says, and the path relative to the hierarchy root.
type Found struct {
	Container
	Path string
}

// FindContainers walks the hierarchy rooted at dir and returns every container cgroup in it, in
// the order of their paths. It does not descend into a container (nested cgroups belong to it).
// Directories that vanish during the walk (containers stopping) are passed over.
func FindContainers(dir string) ([]Found, error) {
	var w walker
	return w.findContainers(dir)
}

// walker walks a hierarchy again and again (a collection each). It lists directories only
// (hostfile.Reader.Subdirs), so the dozens of control files of every cgroup on the way cost
// nothing, and remembers the directories of the last walk: one met again reuses its path and
// what ParseContainer made of it rather than allocating them anew.
type walker struct {
	files hostfile.Reader
	found []Found
	// path is the directory being looked up; last and next hold the directories of the last
	// walk and of this one, by path relative to the root.
	path       []byte
	last, next map[string]walkEntry
}

type walkEntry struct {
	found     Found // Path only, for a directory that is not a container
	container bool
}

// findContainers returns the containers under dir, in a slice valid until the next walk.
func (w *walker) findContainers(dir string) ([]Found, error) {
	if w.next == nil {
		w.last, w.next = map[string]walkEntry{}, map[string]walkEntry{}
	}
	w.found = w.found[:0]
	pending := []string{""} // paths relative to dir still to list; "" is dir itself
	for len(pending) > 0 {
		rel := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		err := w.files.Subdirs(func(name []byte) error {
			w.path = append(append(append(w.path[:0], rel...), '/'), name...)
			e, ok := w.last[string(w.path)]
			if !ok {
				p := string(w.path)
				c, isContainer := ParseContainer(p)
				e = walkEntry{Found{Container: c, Path: p}, isContainer}
			}
			w.next[e.found.Path] = e
			if e.container {
				w.found = append(w.found, e.found)
			} else {
				pending = append(pending, e.found.Path)
			}
			return nil
		}, dir, rel)
		if err != nil && (rel == "" || !errors.Is(err, fs.ErrNotExist)) {
			return w.found, err
		}
	}
	clear(w.last)
	w.last, w.next = w.next, w.last
	slices.SortFunc(w.found, func(a, b Found) int { return strings.Compare(a.Path, b.Path) })
	return w.found, nil
}
