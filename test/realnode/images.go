// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
)

// The node's own images, made here from files on this machine: no registry is reachable.
const (
	// PauseImage is every pod's sandbox: Kubernetes' pause, built from its source.
	PauseImage = "localhost/realnode/pause:3.10"
	// BusyboxImage holds Debian's static busybox at /bin/busybox, for test pods.
	BusyboxImage = "localhost/realnode/busybox:1.35"
)

// pauseSource is pause.c in the k8s.io/kubernetes module the node's binaries are built from,
// from the module cache that build-apiserver.sh filled (the proxy is not asked).
func pauseSource() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+kube.KubeVersion)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("k8s.io/kubernetes@%s is not in the module cache (test/kube/build-apiserver.sh puts it there): %w", kube.KubeVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download k8s.io/kubernetes@%s: no module directory in %q", kube.KubeVersion, out)
	}
	return filepath.Join(mod.Dir, "build", "pause", "linux", "pause.c"), nil
}

// buildImages writes the pause and busybox image archives into dir.
func buildImages(dir string) (archives []string, err error) {
	src, err := pauseSource()
	if err != nil {
		return nil, err
	}
	pause := filepath.Join(dir, "pause")
	// Static, as Kubernetes builds it: the image holds nothing else.
	if out, err := exec.Command("gcc", "-Os", "-static", "-Wall", "-DVERSION=v3.10-realnode", "-o", pause, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gcc %s: %w: %s", src, err, out)
	}
	images := []struct {
		name       string
		files      map[string]string
		entrypoint []string
	}{
		{PauseImage, map[string]string{"pause": pause}, []string{"/pause"}},
		{BusyboxImage, map[string]string{"bin/busybox": "/bin/busybox"}, []string{"/bin/busybox", "sh"}},
	}
	for _, img := range images {
		out := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.name)+".tar")
		if err := writeImage(out, img.name, img.entrypoint, img.files); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.name, err)
		}
		archives = append(archives, out)
	}
	return archives, nil
}

// writeImage writes an OCI image archive of one layer holding files (path in the image: file
// on this machine), named name for containerd's import (io.containerd.image.name).
func writeImage(out, name string, entrypoint []string, files map[string]string) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for path, from := range files {
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		for d := filepath.Dir(path); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}

	blobs := map[string][]byte{}
	descriptor := func(mediaType string, data []byte) map[string]any {
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		blobs[digest] = data
		return map[string]any{"mediaType": mediaType, "digest": digest, "size": len(data)}
	}
	layerDesc := descriptor("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/bin"}, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []any{layerDesc["digest"]}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{layerDesc},
	})
	manifestDesc := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	manifestDesc["annotations"] = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": name[strings.LastIndexByte(name, ':')+1:],
	}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{manifestDesc}})

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	aw := tar.NewWriter(f)
	entries := []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}}
	for digest, data := range blobs {
		entries = append(entries, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(digest, "sha256:"), data})
	}
	for _, e := range entries {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			return err
		}
		if _, err := aw.Write(e.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return f.Close()
}
