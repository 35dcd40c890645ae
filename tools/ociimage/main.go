// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command ociimage builds the collector's container image without a container daemon: an OCI
// image layout, written as one tar archive, holding nothing but the binaries (each at
// /<its file name>; the first is the entrypoint) and the C library files they load (they are
// cgo binaries: the dynamic loader and what their ELF headers name, found as the loader would),
// plus /etc/passwd and /etc/group naming the non-root user it runs as. Two layers, the C library
// first, so that new binaries change only the second one. File times are the commit's
// (-created), so the same inputs give the same image digest.
//
//	ociimage -binary bin/otelcol-gpu -binary bin/otelcol-gpu-agent -out bin/otelcol-gpu-image.tar -version 0.1.0 \
//	  -source https://github.com/otelcol-gpu/otelcol-gpu -revision $(git rev-parse HEAD) \
//	  -created $(git log -1 --format=%cI)
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as by default; the agent's DaemonSet overrides it (see deploy/).
const (
	uid  = 65532
	user = "nonroot"
)

// libraryDirs are where the dynamic loader looks for a library named without a path (Debian's
// multiarch directories first, as its loader does).
var libraryDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

func main() {
	var binaries []string
	flag.Func("binary", "a collector binary, at /<its name> in the image (repeat it; the first is the entrypoint)", func(p string) error {
		binaries = append(binaries, p)
		return nil
	})
	out := flag.String("out", "bin/otelcol-gpu-image.tar", "the OCI image archive to write")
	name := flag.String("name", "otelcol-gpu", "the image's name")
	version := flag.String("version", "", "the image's version and tag (required)")
	source := flag.String("source", "", "where the source lives (org.opencontainers.image.source)")
	revision := flag.String("revision", "", "the source's commit (org.opencontainers.image.revision)")
	created := flag.String("created", "", "creation time, RFC 3339; file times too (default: the binary's modification time)")
	flag.Parse()
	if *version == "" || len(binaries) == 0 {
		log.Fatal("ociimage: -version and -binary are required")
	}
	if err := build(binaries, *out, *name, *version, *source, *revision, *created); err != nil {
		log.Fatalf("ociimage: %v", err)
	}
}

func build(binaries []string, out, name, version, source, revision, created string) error {
	when, err := creationTime(binaries[0], created)
	if err != nil {
		return err
	}
	var libs []string
	arch := ""
	for _, binary := range binaries {
		own, a, libErr := sharedLibraries(binary)
		if libErr != nil {
			return libErr
		}
		if arch != "" && a != arch {
			return fmt.Errorf("%s is for %s, %s for %s: one image holds one architecture", binary, a, binaries[0], arch)
		}
		arch = a
		for _, lib := range own {
			if !slices.Contains(libs, lib) {
				libs = append(libs, lib)
			}
		}
	}
	base := &layer{when: when}
	base.dir("/etc", 0o755)
	base.file("/etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/:/sbin/nologin\n%s:x:%d:%d:%s:/:/sbin/nologin\n", user, uid, uid, user))
	base.file("/etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", user, uid))
	base.dir("/tmp", 0o1777)
	for _, lib := range libs {
		if copyErr := base.copy(lib, lib, 0o755); copyErr != nil {
			return copyErr
		}
	}
	app := &layer{when: when}
	for _, binary := range binaries {
		if copyErr := app.copy("/"+filepath.Base(binary), binary, 0o755); copyErr != nil {
			return copyErr
		}
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range []struct {
		layer *layer
		what  string
	}{{base, "the C library the binaries load, /etc/passwd, /etc/group"}, {app, "the collectors"}} {
		tl, layerErr := l.layer.toLayer()
		if layerErr != nil {
			return layerErr
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: tl, History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "ociimage: " + l.what}})
		if err != nil {
			return err
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: when}
	cfg.Config.User = strconv.Itoa(uid) + ":" + strconv.Itoa(uid)
	cfg.Config.Entrypoint = []string{"/" + filepath.Base(binaries[0])}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	cfg.Config.ExposedPorts = map[string]struct{}{"4317/tcp": {}, "9102/tcp": {}, "9103/tcp": {}, "13133/tcp": {}}
	labels := map[string]string{
		"org.opencontainers.image.title":       name,
		"org.opencontainers.image.description": "OpenTelemetry Collector distribution for GPU clusters",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.created":     when.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if source != "" {
		labels["org.opencontainers.image.source"] = source
	}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	cfg.Config.Labels = labels
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}

	dir, err := os.MkdirTemp(filepath.Dir(out), ".ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// ref.name is the tag OCI tools (skopeo oci-archive:FILE:TAG) read; containerd's import
	// reads its own annotation for the full name.
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          containerdName(name, version),
	})); err != nil {
		return err
	}
	return writeArchive(dir, out, when)
}

// containerdName is name:version spelled as containerd's CRI looks it up. `ctr images import`
// keeps the annotation's name as written, while the CRI normalizes the name a pod asks for the
// way Docker does (no registry: docker.io; no path: library/), so an image imported as
// otelcol-gpu:0.1.0 is not found for image: otelcol-gpu:0.1.0, and the kubelet tries to pull it.
func containerdName(name, version string) string {
	first, _, hasPath := strings.Cut(name, "/")
	if !hasPath {
		name = "library/" + name
	}
	if !hasPath || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		name = "docker.io/" + name
	}
	return name + ":" + version
}

func creationTime(binary, created string) (time.Time, error) {
	if created != "" {
		return time.Parse(time.RFC3339, created)
	}
	fi, err := os.Stat(binary)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime().UTC().Truncate(time.Second), nil
}

// sharedLibraries returns the files the dynamic loader opens to start binary: its interpreter
// and, transitively, every DT_NEEDED library, and the image architecture of the binary.
func sharedLibraries(binary string) ([]string, string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	arch, ok := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
	if !ok {
		return nil, "", fmt.Errorf("%s: unsupported machine %s", binary, f.Machine)
	}
	var files []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, "", err
			}
			files = append(files, string(bytes.TrimRight(b, "\x00")))
		}
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("%s is statically linked: it needs no C library, but this image expects a cgo binary", binary)
	}
	queue := []*elf.File{f}
	for len(queue) > 0 {
		needed, err := queue[0].ImportedLibraries()
		if err != nil {
			return nil, "", err
		}
		queue = queue[1:]
		for _, name := range needed {
			if name == path.Base(files[0]) {
				continue // the C library names the loader, which is the interpreter already
			}
			lib, err := findLibrary(name)
			if err != nil {
				return nil, "", err
			}
			if slices.Contains(files, lib) {
				continue
			}
			files = append(files, lib)
			lf, err := elf.Open(lib)
			if err != nil {
				return nil, "", err
			}
			defer lf.Close()
			queue = append(queue, lf)
		}
	}
	return files, arch, nil
}

func findLibrary(name string) (string, error) {
	for _, dir := range libraryDirs {
		p := path.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("library %s not found in %v", name, libraryDirs)
}

// layer is a tar stream of regular files and directories, owned by root, with one time.
type layer struct {
	buf  bytes.Buffer
	tw   *tar.Writer
	dirs []string
	when time.Time
}

func (l *layer) header(h *tar.Header) {
	if l.tw == nil {
		l.tw = tar.NewWriter(&l.buf)
	}
	h.ModTime, h.Format = l.when, tar.FormatPAX
	if err := l.tw.WriteHeader(h); err != nil {
		panic(err) // writing to memory
	}
}

func (l *layer) dir(name string, mode int64) {
	name = path.Clean(name)
	if name == "/" || slices.Contains(l.dirs, name) {
		return
	}
	l.dir(path.Dir(name), 0o755)
	l.dirs = append(l.dirs, name)
	l.header(&tar.Header{Typeflag: tar.TypeDir, Name: name[1:] + "/", Mode: mode})
}

func (l *layer) file(name string, mode int64, data []byte) {
	l.dir(path.Dir(name), 0o755)
	l.header(&tar.Header{Typeflag: tar.TypeReg, Name: name[1:], Mode: mode, Size: int64(len(data))})
	_, _ = l.tw.Write(data)
}

// copy puts the file at from (symbolic links followed) into the layer at name.
func (l *layer) copy(name, from string, mode int64) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	l.file(name, mode, data)
	return nil
}

func (l *layer) toLayer() (v1.Layer, error) {
	if l.tw == nil {
		return nil, errors.New("empty layer")
	}
	if err := l.tw.Close(); err != nil {
		return nil, err
	}
	data := l.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeArchive tars the image layout in dir into out, atomically, in a stable order.
func writeArchive(dir, out string, when time.Time) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".ociimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Read through a root: the walk's paths stay inside dir even if something swaps a link in.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(tmp)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: when, Format: tar.FormatPAX})
		}
		data, err := root.ReadFile(rel)
		if err != nil {
			return err
		}
		err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: when, Format: tar.FormatPAX})
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		tmp.Close()
		return err
	}
	return os.Rename(tmp.Name(), out)
}
