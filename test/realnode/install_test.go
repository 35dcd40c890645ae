// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// namespace is deploy/'s.
const namespace = "otelcol-gpu"

// An installer puts otelcol-gpu on the node the way deploy/README.md tells an operator to, and
// takes it off again. TestRealNode runs every check after each installer in installers.
type installer struct {
	name      string
	install   func(t *testing.T)
	uninstall func(t *testing.T)
}

// installers: kustomize, as `make deploy` does, and the Helm chart.
var installers = []installer{kustomizeInstaller("base"), helmInstaller()}

// kustomizeInstaller installs testdata/<overlay>: deploy/'s base or overlay, with the component
// that puts the agent on the simulated GPUs.
func kustomizeInstaller(overlay string) installer {
	dir := filepath.Join(testdata(), overlay)
	return installer{
		name: "kustomize " + overlay,
		install: func(t *testing.T) {
			t.Helper()
			// make deploy: kubectl's own kustomize, allowed to read distro/.
			out, err := node.Kubectl(nil, "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir)
			require.NoError(t, err, out)
			out, err = node.Kubectl([]byte(out), "apply", "-f", "-")
			require.NoError(t, err, out)
		},
		uninstall: func(t *testing.T) {
			t.Helper()
			// make undeploy: every object, the namespace and its Secrets with it; kubectl waits
			// until they are gone.
			out, err := node.Kubectl(nil, "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir)
			require.NoError(t, err, out)
			out, err = node.Kubectl([]byte(out), "delete", "--ignore-not-found", "--timeout=3m", "-f", "-")
			require.NoError(t, err, out)
		},
	}
}

// helmInstaller installs deploy/helm/otelcol-gpu as deploy/README.md's Helm section does, with
// the chart's defaults (deploy/base's choices) and testdata/simulated-gpus/values.yaml, which
// puts the agent on the simulated GPUs.
func helmInstaller() installer {
	return installer{
		name: "helm",
		install: func(t *testing.T) {
			t.Helper()
			// The namespace's Pod Security level, which make secrets' namespace leaves out.
			out, err := node.Kubectl(nil, "apply", "-f", filepath.Join(stack.RepoRoot(), "deploy", "base", "namespace.yaml"))
			require.NoError(t, err, out)
			out, err = helm(t, "install", release, filepath.Join(stack.RepoRoot(), "deploy", "helm", "otelcol-gpu"), "--namespace", namespace,
				"--values", filepath.Join(testdata(), "simulated-gpus", "values.yaml"))
			require.NoError(t, err, out)
		},
		uninstall: func(t *testing.T) {
			t.Helper()
			out, err := helm(t, "uninstall", release, "--namespace", namespace)
			require.NoError(t, err, out)
			// The chart does not own the namespace: the Secrets go with it. kubectl waits until
			// everything in it is gone.
			out, err = node.Kubectl(nil, "delete", "namespace", namespace, "--timeout=3m")
			require.NoError(t, err, out)
		},
	}
}

// release is the Helm release's name, deploy/README.md's.
const release = "otelcol-gpu"

// helm runs Helm (test/helm/build-helm.sh) as admin inside the node's network, with a
// configuration and caches of its own: none of the user's.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := stack.Built(t, "HELM_BIN", "test/helm/build-helm.sh")
	kubeconfig, err := node.Kubeconfig("admin")
	require.NoError(t, err)
	home := t.TempDir()
	cmd := node.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// prepare does what deploy/README.md asks before the manifests: the image on the node, the
// Secrets; and what only the test needs, the scenario's ConfigMap.
func prepare(t *testing.T, scenario []byte) {
	t.Helper()
	// ctr -n k8s.io images import bin/otelcol-gpu-image.tar, on the node.
	out, err := node.Ctr("images", "import", imageArchive(t))
	require.NoError(t, err, out)

	// make secrets: the namespace, then deploy/secrets.sh's Secrets applied.
	out, err = node.Kubectl(nil, "create", "namespace", namespace, "--dry-run=client", "-o", "yaml")
	require.NoError(t, err, out)
	out, err = node.Kubectl([]byte(out), "apply", "-f", "-")
	require.NoError(t, err, out)
	kubectl, err := kube.Built("kubectl")
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(stack.RepoRoot(), "deploy", "secrets.sh"))
	cmd.Env = append(os.Environ(), "SECRETS_DIR="+t.TempDir(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"))
	secrets, err := cmd.Output()
	require.NoError(t, err, "deploy/secrets.sh: %s", stderr(err))
	out, err = node.Kubectl(secrets, "apply", "-f", "-")
	require.NoError(t, err, out)

	path := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(path, scenario, 0o600))
	out, err = node.Kubectl(nil, "create", "configmap", "otelcol-gpu-scenario", "-n", namespace,
		"--from-file=scenario.yaml="+path, "--dry-run=client", "-o", "yaml")
	require.NoError(t, err, out)
	out, err = node.Kubectl([]byte(out), "apply", "-f", "-")
	require.NoError(t, err, out)
}

// imageArchive is `make image`'s archive: OTELCOL_IMAGE, else bin/otelcol-gpu-image.tar.
func imageArchive(t *testing.T) string {
	t.Helper()
	path := os.Getenv("OTELCOL_IMAGE")
	if path == "" {
		path = filepath.Join(stack.RepoRoot(), "bin", "otelcol-gpu-image.tar")
	}
	_, err := os.Stat(path)
	require.NoError(t, err, "the image archive is needed: run `make image`, or set OTELCOL_IMAGE")
	return path
}

// rolledOut waits until the workloads of namespace have rolled out: every pod of the new
// templates ready.
func rolledOut(t *testing.T, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		if out, err := node.Kubectl(nil, "rollout", "status", "-n", namespace, kind, "--timeout=3m"); err != nil {
			pods, _ := node.Kubectl(nil, "describe", "pods", "-n", namespace)
			// A container that exits says why only in its log.
			logs, _ := node.Kubectl(nil, "logs", "-n", namespace, kind, "--tail=20")
			t.Fatalf("%s: %v\n%s\n%s\nits log:\n%s", kind, err, out, pods, logs)
		}
	}
}

func stderr(err error) string {
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(exit.Stderr)
	}
	return ""
}

// waitFor is how long a check waits for what the agent reports: its task receiver collects
// every 30 s, the gpu receiver and the attribution's refresh every 10 s.
const waitFor = 2 * time.Minute
