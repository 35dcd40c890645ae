// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs // import "github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// FindContainers walks the hierarchy rooted at dir and returns every container cgroup in it.
// It does not descend into a container (nested cgroups belong to it). Directories that vanish
// during the walk (containers stopping) are passed over.
func FindContainers(dir string) ([]Found, error) {
	var found []Found
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil
			}
			return err
		}
		if !d.IsDir() || p == dir {
			return nil
		}
		rel := "/" + filepath.ToSlash(p[len(dir)+1:])
		if c, ok := ParseContainer(rel); ok {
			found = append(found, Found{Container: c, Path: rel})
			return filepath.SkipDir
		}
		return nil
	})
	return found, err
}
