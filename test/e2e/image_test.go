// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageArchive is `make image`'s output (OTELCOL_IMAGE, set by `make e2e`).
func imageArchive(t testing.TB) string {
	path := os.Getenv("OTELCOL_IMAGE")
	if path == "" {
		path = filepath.Join(repoRoot(t), "bin", "otelcol-gpu-image.tar")
	}
	_, err := os.Stat(path)
	require.NoError(t, err, "the image archive is needed: run `make image`, or set OTELCOL_IMAGE")
	return path
}

// ociArchive is an OCI image layout in one tar file: its blobs by digest.
type ociArchive map[string][]byte

func readArchive(t testing.TB, path string) ociArchive {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	blobs := ociArchive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return blobs
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			name := h.Name
			if digest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
				name = "sha256:" + digest
			}
			blobs[name] = data
		}
	}
}

func (a ociArchive) json(t testing.TB, name string, v any) {
	t.Helper()
	data, ok := a[name]
	require.True(t, ok, "%s is in the archive", name)
	require.NoError(t, json.Unmarshal(data, v), name)
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// TestImage unpacks `make image`'s archive as a container runtime would (each layer in order
// into one directory) and runs the binary from that root: `validate` on every configuration in
// distro/, mounted where deploy/ mounts it, with the host's / at /hostfs (read-only, in a
// mount namespace of its own) as the agent's DaemonSet has it, as the image's default user. The
// root must hold nothing but the binary, the C library files it loads (as ldd lists them) and
// the user database; the image runs as a non-root user and is labelled with version and source.
func TestImage(t *testing.T) {
	archive := readArchive(t, imageArchive(t))
	var index struct{ Manifests []descriptor }
	archive.json(t, "index.json", &index)
	require.Len(t, index.Manifests, 1)
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	archive.json(t, index.Manifests[0].Digest, &manifest)
	var config struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	archive.json(t, manifest.Config.Digest, &config)

	version := regexp.MustCompile(`(?m)^  version: *(\S+)`).FindSubmatch(mustRead(t, filepath.Join(repoRoot(t), "builder-config.yaml")))
	require.NotNil(t, version, "builder-config.yaml names the version")
	assert.Equal(t, string(version[1]), config.Config.Labels["org.opencontainers.image.version"])
	assert.Equal(t, string(version[1]), index.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	assert.NotEmpty(t, config.Config.Labels["org.opencontainers.image.source"])
	assert.Regexp(t, `^[0-9a-f]{40}$`, config.Config.Labels["org.opencontainers.image.revision"])
	assert.Equal(t, "65532:65532", config.Config.User, "a non-root user by default")
	assert.Equal(t, []string{"/otelcol-gpu"}, config.Config.Entrypoint)
	assert.Equal(t, "linux", config.OS)

	root := t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755)) // the image's user must be able to enter its /
	for _, layer := range manifest.Layers {
		require.Equal(t, "application/vnd.oci.image.layer.v1.tar+gzip", layer.MediaType)
		unpackLayer(t, archive[layer.Digest], root)
	}

	// Nothing but the binary, what it loads and the user database.
	want := []string{"/otelcol-gpu", "/etc/passwd", "/etc/group"}
	ldd, err := exec.Command("ldd", collectorBinary(t)).Output()
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)(?:=> )?(/\S+) \(0x`).FindAllSubmatch(ldd, -1) {
		want = append(want, string(m[1]))
	}
	var got []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimPrefix(p, root))
		}
		return err
	}))
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got)
	passwd := string(mustRead(t, filepath.Join(root, "etc", "passwd")))
	assert.Contains(t, passwd, ":65532:65532:", "the default user has a name")

	// What the runtime and deploy/ add: /proc, the configurations, the host's / for the agent.
	for _, dir := range []string{"proc", "hostfs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
	}
	// demo.yaml names its scenario relative to the working directory, which chroot sets to /.
	distro := filepath.Join(repoRoot(t), "distro")
	require.NoError(t, os.CopyFS(filepath.Join(root, "distro", "scenarios"), os.DirFS(filepath.Join(distro, "scenarios"))))
	configs, err := filepath.Glob(filepath.Join(distro, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, configs)
	for _, config := range configs {
		require.NoError(t, os.WriteFile(filepath.Join(root, "distro", filepath.Base(config)), mustRead(t, config), 0o644))
	}
	for _, config := range configs {
		name := filepath.Base(config)
		t.Run(name, func(t *testing.T) {
			// unshare gives the bind mounts a private mount namespace: they vanish with it.
			script := `set -e
mount --bind /proc "$ROOT/proc"
mount --bind -o ro / "$ROOT/hostfs"
exec chroot --userspec=65532:65532 "$ROOT" /otelcol-gpu validate --config "/distro/$CONFIG"`
			cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
			cmd.Env = []string{"ROOT=" + root, "CONFIG=" + name, "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
				"MY_POD_IP=10.0.0.1", "K8S_NODE_NAME=node-1", "K8S_NODE_IP=10.0.0.1", "OTELCOL_GPU_GATEWAY=otelcol-gpu-gateway.otelcol-gpu.svc"}
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "validate %s from the image's root (needs root, for chroot and mount): %s", name, out)
		})
	}
	t.Run("without its C library", func(t *testing.T) {
		// The check can fail: the same binary does not start from a root lacking what it loads.
		require.NoError(t, os.Remove(filepath.Join(root, strings.TrimPrefix(want[slices.IndexFunc(want, func(p string) bool { return strings.Contains(p, "libc.so") })], "/"))))
		out, err := exec.Command("chroot", root, "/otelcol-gpu", "--version").CombinedOutput()
		assert.Error(t, err, "%s", out)
	})
}

func mustRead(t testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// unpackLayer extracts one gzip'd layer into root; entries may only be directories and regular
// files inside root.
func unpackLayer(t testing.TB, blob []byte, root string) {
	t.Helper()
	require.NotNil(t, blob, "layer blob in the archive")
	gz, err := gzip.NewReader(strings.NewReader(string(blob)))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err)
		target := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(target, fs.FileMode(h.Mode)&fs.ModePerm))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(target, data, fs.FileMode(h.Mode)&fs.ModePerm))
		default:
			t.Fatalf("layer entry %s of type %c: the image holds only directories and files", h.Name, h.Typeflag)
		}
	}
}
