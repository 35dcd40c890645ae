// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
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

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// imageArchive is `make image`'s output (OTELCOL_IMAGE, set by `make e2e`).
func imageArchive(tb testing.TB) string {
	path := os.Getenv("OTELCOL_IMAGE")
	if path == "" {
		path = filepath.Join(repoRoot(tb), "bin", "otelcol-gpu-image.tar")
	}
	_, err := os.Stat(path)
	require.NoError(tb, err, "the image archive is needed: run `make image`, or set OTELCOL_IMAGE")
	return path
}

// TestImage unpacks `make image`'s archive with umoci (a real OCI implementation: it checks every
// digest and media type and applies each layer in order, as a container runtime does) and runs
// the binaries from that root: `validate` on every configuration in distro/ with the distribution
// that runs it (the agent's for the agent's configurations), with the host's / at /hostfs
// (read-only, in a mount namespace of its own) as the agent's DaemonSet has it, as the image's
// default user, and the node check on a simulated node. The root must hold nothing but the three
// binaries, the C library files they load (as ldd lists them) and the user database; the image runs as a non-root user and is labeled
// with version, source and revision.
func TestImage(t *testing.T) {
	version := regexp.MustCompile(`(?m)^ {2}version: *(\S+)`).FindSubmatch(mustRead(t, filepath.Join(repoRoot(t), "builder-config.yaml")))
	require.NotNil(t, version, "builder-config.yaml names the version")
	work := t.TempDir()
	layout, bundle := filepath.Join(work, "layout"), filepath.Join(work, "bundle")
	require.NoError(t, os.Mkdir(layout, 0o755))
	run(t, "tar", "-xf", imageArchive(t), "-C", layout)
	// The tag is the version: what `skopeo copy oci-archive:FILE:TAG` and a registry would see.
	run(t, requireTool(t, "umoci"), "unpack", "--image", layout+":"+string(version[1]), bundle)

	var runtime struct {
		Process struct {
			User struct{ UID, GID int }
			Args []string
		}
		Annotations map[string]string
	}
	require.NoError(t, json.Unmarshal(mustRead(t, filepath.Join(bundle, "config.json")), &runtime))
	assert.Equal(t, 65532, runtime.Process.User.UID, "a non-root user by default")
	assert.Equal(t, 65532, runtime.Process.User.GID)
	assert.Equal(t, []string{"/otelcol-gpu"}, runtime.Process.Args)
	labels := runtime.Annotations // umoci carries the image's labels over as annotations
	assert.Equal(t, string(version[1]), labels["org.opencontainers.image.version"])
	assert.NotEmpty(t, labels["org.opencontainers.image.source"])
	assert.Regexp(t, `^[0-9a-f]{40}$`, labels["org.opencontainers.image.revision"])
	assert.Equal(t, "linux", labels["org.opencontainers.image.os"])

	root := filepath.Join(bundle, "rootfs")
	require.NoError(t, os.Chmod(root, 0o755)) // the image's user must be able to enter its /
	// Nothing but the binaries, what they load and the user database.
	want := []string{"/otelcol-gpu", "/otelcol-gpu-agent", "/otelcol-gpu-check", "/etc/passwd", "/etc/group"}
	for _, bin := range []string{stack.Binary(t), stack.AgentBinary(t), stack.CheckBinary(t)} {
		ldd, err := exec.Command("ldd", bin).Output()
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)(?:=> )?(/\S+) \(0x`).FindAllSubmatch(ldd, -1) {
			if !slices.Contains(want, string(m[1])) {
				want = append(want, string(m[1]))
			}
		}
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
		require.NoError(t, os.WriteFile(filepath.Join(root, "distro", filepath.Base(config)), mustRead(t, config), 0o644)) //nolint:gosec // G306: the image's user (65532), not this one, reads it
	}
	for _, config := range configs {
		name := filepath.Base(config)
		t.Run(name, func(t *testing.T) {
			// unshare gives the bind mounts a private mount namespace: they vanish with it.
			bin := "/otelcol-gpu"
			if slices.Contains(stack.AgentConfigs, name) {
				bin = "/otelcol-gpu-agent"
			}
			script := `set -e
mount --bind /proc "$ROOT/proc"
mount --bind -o ro / "$ROOT/hostfs"
exec chroot --userspec=65532:65532 "$ROOT" "$BIN" validate --config "/distro/$CONFIG"`
			cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
			cmd.Env = []string{
				"ROOT=" + root, "CONFIG=" + name, "BIN=" + bin, "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
				"MY_POD_IP=10.0.0.1", "K8S_NODE_NAME=node-1", "K8S_NODE_IP=10.0.0.1", "OTELCOL_GPU_GATEWAY=otelcol-gpu-gateway.otelcol-gpu.svc",
				// demo.yaml's demo node (cmd/demonode writes it); any host tree passes validation.
				"OTELCOL_GPU_DEMO_ROOT=/hostfs",
			}
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "validate %s from the image's root (needs root, for chroot and mount): %s", name, out)
		})
	}
	t.Run("otelcol-gpu-check", func(t *testing.T) {
		// The check re-executes itself (/proc/self/exe) for the reads: it must find itself, and
		// the simulated node's GPUs, from the image's root as its user.
		require.NoError(t, os.WriteFile(filepath.Join(root, "distro", "kmsg.log"), nil, 0o644)) //nolint:gosec // G306: the image's user reads it
		script := `set -e
mount --bind /proc "$ROOT/proc"
exec chroot --userspec=65532:65532 "$ROOT" /otelcol-gpu-check -o json -backend simulated -scenario /distro/scenarios/dgx-h100-demo.yaml -gpus 8 -kmsg-path /distro/kmsg.log`
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
		cmd.Env = []string{"ROOT=" + root, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		out, err := cmd.Output()
		var report struct {
			Status string
			GPUs   []struct{ UUID string }
			Checks []struct{ Name, Status string }
		}
		require.NoError(t, json.Unmarshal(out, &report), "the check's JSON report (exit: %v): %s", err, out)
		assert.NoError(t, err, "the demo node is healthy: %s", out)
		assert.Equal(t, "healthy", report.Status)
		assert.Len(t, report.GPUs, 8)
		assert.Contains(t, report.Checks, struct{ Name, Status string }{"backend", "pass"})
	})
	t.Run("without its C library", func(t *testing.T) {
		// The check can fail: the same binary does not start from a root lacking what it loads.
		require.NoError(t, os.Remove(filepath.Join(root, strings.TrimPrefix(want[slices.IndexFunc(want, func(p string) bool { return strings.Contains(p, "libc.so") })], "/"))))
		out, err := exec.Command("chroot", root, "/otelcol-gpu", "--version").CombinedOutput()
		assert.Error(t, err, "%s", out)
	})
}

func mustRead(tb testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	return data
}

// run runs a command that must succeed.
func run(tb testing.TB, name string, args ...string) {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(tb, err, "%s %v: %s", name, args, out)
}
