// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package cdi reads a node's Container Device Interface specs: the files in which device
// drivers, DRA drivers among them, tell container runtimes what each device they hand out puts
// into a container (github.com/cncf-tags/container-device-interface, SPEC.md). Only the devices'
// names and device nodes are read: they are what joins a device a driver allocated to the
// hardware behind it.
package cdi // import "github.com/otelcol-gpu/otelcol-gpu/internal/cdi"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// DefaultSpecDirs are the directories runtimes read specs from (the specification's defaults):
// static specs in /etc/cdi, those written at run time (a DRA driver's, one per prepared claim) in
// /var/run/cdi, which wins where both declare a device.
var DefaultSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

const (
	// maxSpecBytes bounds one spec file. NVIDIA's spec of a whole node, with every driver library
	// it mounts, is some hundred kilobytes; a larger file is refused, not read.
	maxSpecBytes = 4 << 20
	// maxSpecFiles bounds the files read from one directory: a DRA driver writes one per claim
	// prepared on the node.
	maxSpecFiles = 4096
	// maxLinks bounds the symbolic links followed to find a directory on the host.
	maxLinks = 40
)

// Spec is what is read of a spec file.
type Spec struct {
	// Kind is the devices' vendor/class, e.g. k8s.gpu.nvidia.com/claim.
	Kind    string   `json:"kind" yaml:"kind"`
	Devices []Device `json:"devices" yaml:"devices"`
}

// Device is one device of a spec.
type Device struct {
	Name  string `json:"name" yaml:"name"`
	Edits Edits  `json:"containerEdits" yaml:"containerEdits"`
}

// Edits are what a device puts into a container; only its device nodes are read.
type Edits struct {
	DeviceNodes []DeviceNode `json:"deviceNodes" yaml:"deviceNodes"`
}

// DeviceNode is a device node as the container sees it.
type DeviceNode struct {
	Path string `json:"path" yaml:"path"`
}

// Parse reads a spec: JSON, or YAML (what the file's extension says). Fields other than those of
// Spec are ignored, as a runtime of an older specification version would.
func Parse(data []byte, isJSON bool) (*Spec, error) {
	if len(data) > maxSpecBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), maxSpecBytes)
	}
	var s Spec
	var err error
	if isJSON {
		err = json.Unmarshal(data, &s)
	} else {
		err = yaml.NewDecoder(bytes.NewReader(data)).Decode(&s)
		if errors.Is(err, io.EOF) {
			err = errors.New("empty")
		}
	}
	if err != nil {
		return nil, err
	}
	vendor, class, ok := strings.Cut(s.Kind, "/")
	if !ok || vendor == "" || class == "" || strings.ContainsAny(class, "/=") {
		return nil, fmt.Errorf("kind %q is not vendor/class", s.Kind)
	}
	for i, d := range s.Devices {
		if d.Name == "" || strings.ContainsAny(d.Name, "/=") {
			return nil, fmt.Errorf("devices[%d]: name %q is not a device name", i, d.Name)
		}
	}
	return &s, nil
}

// Devices are the device node paths of each device of a node's specs, by its fully qualified
// name (vendor/class=name), what pod-resources names a DRA device's CDI devices by.
type Devices map[string][]string

// Reader reads the specs of a host mounted at a root, on each Read; a file is parsed again only
// when it changed.
type Reader struct {
	root  string
	dirs  []string
	files map[string]specFile // by path under root, as last read
}

type specFile struct {
	mod  time.Time
	size int64
	spec *Spec
	err  error
}

// NewReader reads dirs, absolute paths on the host, below root.
func NewReader(root string, dirs []string) *Reader {
	return &Reader{root: root, dirs: dirs, files: map[string]specFile{}}
}

// Read returns every device of the specs in the directories, a later directory's declaration of
// a device winning over an earlier one's. A missing directory declares nothing; a spec file that
// cannot be read or parsed is left out, and named in the error.
func (r *Reader) Read() (Devices, error) {
	devices := Devices{}
	seen := map[string]bool{}
	var errs []error
	for _, dir := range r.dirs {
		resolved, err := resolveIn(r.root, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries, err := os.ReadDir(resolved)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		read := 0
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if !e.Type().IsRegular() || ext != ".json" && ext != ".yaml" {
				continue
			}
			read++
			if read > maxSpecFiles {
				errs = append(errs, fmt.Errorf("%s: more than %d spec files, the others not read", dir, maxSpecFiles))
				break
			}
			path := filepath.Join(resolved, e.Name())
			f := r.file(path, ext == ".json")
			seen[path] = true
			if f.err != nil {
				errs = append(errs, fmt.Errorf("CDI spec %s: %w", filepath.Join(dir, e.Name()), f.err))
				continue
			}
			for _, d := range f.spec.Devices {
				nodes := make([]string, 0, len(d.Edits.DeviceNodes))
				for _, n := range d.Edits.DeviceNodes {
					nodes = append(nodes, n.Path)
				}
				devices[f.spec.Kind+"="+d.Name] = nodes
			}
		}
	}
	for path := range r.files {
		if !seen[path] {
			delete(r.files, path)
		}
	}
	return devices, errors.Join(errs...)
}

// file is the spec at path, parsed again only if its size or modification time changed.
func (r *Reader) file(path string, isJSON bool) specFile {
	info, err := os.Stat(path)
	if err != nil {
		return specFile{err: err}
	}
	if f, ok := r.files[path]; ok && f.size == info.Size() && f.mod.Equal(info.ModTime()) {
		return f
	}
	f := specFile{mod: info.ModTime(), size: info.Size()}
	var data []byte
	if data, f.err = hostfile.ReadLimited(path, maxSpecBytes); f.err == nil {
		f.spec, f.err = Parse(data, isJSON)
	}
	r.files[path] = f
	return f
}

// resolveIn finds the host's path below root, following symbolic links as the host would:
// an absolute link (/var/run -> /run on systemd hosts) points into root, not into the agent's
// own filesystem, and ".." stops at root.
func resolveIn(root, path string) (string, error) {
	rest := strings.Split(strings.Trim(filepath.Clean(path), "/"), "/")
	var done []string
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		next := filepath.Join(append([]string{root}, append(done, name)...)...)
		info, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			done = append(done, name)
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("%s: more than %d symbolic links", path, maxLinks)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			done = nil
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return filepath.Join(append([]string{root}, done...)...), nil
}
