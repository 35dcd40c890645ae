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
	var files hostfile.Reader
	return findContainers(&files, dir, nil)
}

// findContainers appends the containers under dir to found[:0]. It lists directories only
// (hostfile.Reader.Subdirs): the dozens of control files of every cgroup on the way cost nothing.
func findContainers(files *hostfile.Reader, dir string, found []Found) ([]Found, error) {
	found = found[:0]
	pending := []string{""} // paths relative to dir still to list; "" is dir itself
	for len(pending) > 0 {
		rel := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		err := files.Subdirs(func(name []byte) error {
			p := rel + "/" + string(name)
			if c, ok := ParseContainer(p); ok {
				found = append(found, Found{Container: c, Path: p})
			} else {
				pending = append(pending, p)
			}
			return nil
		}, dir, rel)
		if err != nil && (rel == "" || !errors.Is(err, fs.ErrNotExist)) {
			return found, err
		}
	}
	slices.SortFunc(found, func(a, b Found) int { return strings.Compare(a.Path, b.Path) })
	return found, nil
}
