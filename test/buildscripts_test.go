// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package test holds the test of the build scripts of test/ (helm, kube, prometheus, thanos): their
// plan mode run against a Go module proxy the test serves itself, which serves only what every
// proxy must (a .info with Version and Time, the go.mod, the zip), from small modules standing in
// for the real ones. No network, no real module.
package test

import (
	"archive/zip"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleProxy is a GOPROXY=file:// directory.
type moduleProxy struct {
	dir string
}

// add serves path@version: its go.mod and a zip of files (go.mod among them), and a .info holding
// info (the Version and Time, and whatever more a test gives it).
func (p moduleProxy) add(t *testing.T, path, version, info string, files map[string]string) {
	t.Helper()
	require.Equal(t, strings.ToLower(path), path, "the proxy serves lowercase paths only (no case escaping)")
	dir := filepath.Join(p.dir, filepath.FromSlash(path), "@v")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	list, err := os.OpenFile(filepath.Join(dir, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = fmt.Fprintln(list, version)
	require.NoError(t, err)
	require.NoError(t, list.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".info"), []byte(info), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".mod"), []byte(files["go.mod"]), 0o600))

	archive, err := os.Create(filepath.Join(dir, version+".zip"))
	require.NoError(t, err)
	w := zip.NewWriter(archive)
	for name, content := range files {
		f, err := w.Create(path + "@" + version + "/" + name)
		require.NoError(t, err)
		_, err = f.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, archive.Close())
}

// infoOnly is the .info every proxy must serve: the version and its time, nothing else.
func infoOnly(version string) string {
	return `{"Version":"` + version + `","Time":"2026-09-09T22:21:05Z"}`
}

// scripts runs the build scripts against its proxy, with an empty module cache and cache directory.
type scripts struct {
	proxy    moduleProxy
	modCache string
	env      []string
}

func newScripts(t *testing.T) *scripts {
	t.Helper()
	home := t.TempDir()
	s := &scripts{proxy: moduleProxy{dir: t.TempDir()}, modCache: filepath.Join(home, "gomodcache")}
	// The module cache is read-only, as the go command leaves it; the scripts set GOFLAGS
	// themselves, so -modcacherw cannot be passed: made writable before t.TempDir removes it.
	t.Cleanup(func() {
		_ = filepath.WalkDir(s.modCache, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				err = os.Chmod(path, 0o700) //nolint:gosec // G302: a directory the test removes
			}
			return err
		})
	})
	// The go command keeps telemetry counters under $HOME/.config/go unless its mode there is
	// off: off, so that nothing else writes in the home the test removes.
	telemetry := filepath.Join(home, ".config", "go", "telemetry")
	require.NoError(t, os.MkdirAll(telemetry, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(telemetry, "mode"), []byte("off"), 0o600))
	s.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"GOENV=off",
		"GOPROXY=file://" + s.proxy.dir,
		"GOMODCACHE=" + s.modCache,
		"GOPATH=" + filepath.Join(home, "go"),
		"GOSUMDB=off",
		"GONOSUMDB=*",
		"GOPRIVATE=",
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOWORK=off",
		"PLAN_ONLY=1",
	}
	return s
}

// run runs script with args and extra environment, and returns its stdout and stderr.
func (s *scripts) run(t *testing.T, extraEnv []string, script string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	// Seconds on any machine: the modules are a few bytes and nothing compiles.
	const deadline = 60 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Env = append(append([]string{}, s.env...), extraEnv...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v did not finish within %s (stderr: %s)", script, args, deadline, errOut.String())
	return out.String(), errOut.String(), err
}

// gomod is where the go command keeps the go.mod of path@version in the test's module cache.
func (s *scripts) gomod(path, version string) string {
	return filepath.Join(s.modCache, "cache", "download", filepath.FromSlash(path), "@v", version+".mod")
}

// helmGoMod requires client-go as Helm's go.mod does: in a require block, among others.
const helmGoMod = `module helm.sh/helm/v3

go 1.24.0

require (
	github.com/Masterminds/semver/v3 v3.4.0
	k8s.io/api v0.34.1
	k8s.io/client-go v0.34.1 // the Kubernetes helm is built for
	sigs.k8s.io/yaml v1.6.0
)

require (
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b // indirect
)
`

func TestHelmPlan(t *testing.T) {
	s := newScripts(t)
	files := map[string]string{"go.mod": helmGoMod, "cmd/helm/helm.go": "package main\n\nfunc main() {}\n"}
	s.proxy.add(t, "helm.sh/helm/v3", "v3.22.0", infoOnly("v3.22.0"), files)
	// A proxy may send the commit too (proxy.golang.org's Origin); then it is used.
	s.proxy.add(t, "helm.sh/helm/v3", "v3.22.1",
		`{"Version":"v3.22.1","Time":"2026-10-01T00:00:00Z","Origin":{"VCS":"git","URL":"https://github.com/helm/helm","Ref":"refs/tags/v3.22.1","Hash":"5dc1c5e4bd4b1cd4a0a4e0d4e1e7c7c9a6c5b1f2"}}`,
		files)
	const kubeFlags = " -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=34" +
		" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34"

	stdout, stderr, err := s.run(t, []string{"HELM_VERSION=v3.22.0"}, "helm/build-helm.sh")
	require.NoError(t, err, "stderr: %s", stderr)
	assert.Equal(t, "gomod: "+s.gomod("helm.sh/helm/v3", "v3.22.0")+"\n"+
		"ldflags: -s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0"+kubeFlags+"\n", stdout)
	assert.Contains(t, stderr, "the module proxy sent no commit for helm.sh/helm/v3@v3.22.0")

	stdout, stderr, err = s.run(t, []string{"HELM_VERSION=v3.22.1"}, "helm/build-helm.sh")
	require.NoError(t, err, "stderr: %s", stderr)
	assert.Equal(t, "gomod: "+s.gomod("helm.sh/helm/v3", "v3.22.1")+"\n"+
		"ldflags: -s -w -X helm.sh/helm/v3/internal/version.version=v3.22.1"+
		" -X helm.sh/helm/v3/internal/version.gitCommit=5dc1c5e4bd4b1cd4a0a4e0d4e1e7c7c9a6c5b1f2 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"+
		kubeFlags+"\n", stdout)
	assert.Empty(t, stderr)
}

func TestHelmPlanErrors(t *testing.T) {
	s := newScripts(t)
	s.proxy.add(t, "helm.sh/helm/v3", "v3.22.0", infoOnly("v3.22.0"), map[string]string{
		"go.mod": "module helm.sh/helm/v3\n\ngo 1.24.0\n\nrequire k8s.io/apimachinery v0.34.1\n",
	})

	_, stderr, err := s.run(t, []string{"HELM_VERSION=v3.22.0"}, "helm/build-helm.sh")
	assert.Error(t, err)
	assert.Contains(t, stderr, "could not read client-go's version in the go.mod of helm.sh/helm/v3@v3.22.0")
	assert.Contains(t, stderr, "no requirement of k8s.io/client-go")

	// A version the proxy does not have: the go command's reason, and a failure.
	stdout, stderr, err := s.run(t, []string{"HELM_VERSION=v3.99.0"}, "helm/build-helm.sh")
	assert.Error(t, err)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "helm.sh/helm/v3@v3.99.0")
}

func TestPrometheusOperatorCRDs(t *testing.T) {
	s := newScripts(t)
	const crd = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
	s.proxy.add(t, "github.com/prometheus-operator/prometheus-operator", "v0.85.0", infoOnly("v0.85.0"), map[string]string{
		"go.mod": "module github.com/prometheus-operator/prometheus-operator\n\ngo 1.24.0\n",
		crd:      "kind: CustomResourceDefinition\n",
	})
	s.proxy.add(t, "github.com/prometheus-operator/prometheus-operator", "v0.86.0", infoOnly("v0.86.0"), map[string]string{
		"go.mod": "module github.com/prometheus-operator/prometheus-operator\n\ngo 1.24.0\n",
	})

	stdout, stderr, err := s.run(t, []string{"PROMETHEUS_OPERATOR_VERSION=v0.85.0"}, "helm/build-helm.sh", "crds")
	require.NoError(t, err, "stderr: %s", stderr)
	dir := filepath.Join(s.modCache, "github.com", "prometheus-operator", "prometheus-operator@v0.85.0", "example", "prometheus-operator-crd")
	assert.Equal(t, dir+"\n", stdout)
	assert.FileExists(t, filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"))

	_, stderr, err = s.run(t, []string{"PROMETHEUS_OPERATOR_VERSION=v0.86.0"}, "helm/build-helm.sh", "crds")
	assert.Error(t, err)
	assert.Contains(t, stderr, "no CRDs in prometheus-operator@v0.86.0")
}

// kubernetesGoMod lays out its staging modules as Kubernetes' go.mod does: required at v0.0.0 and
// replaced by directories of the repository, which its module zip lacks.
const kubernetesGoMod = `// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.24.0

godebug default=go1.24

require (
	github.com/spf13/cobra v1.9.1
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
	k8s.io/component-base v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/component-base => ./staging/src/k8s.io/component-base
)
`

func TestKubernetesPlan(t *testing.T) {
	s := newScripts(t)
	s.proxy.add(t, "k8s.io/kubernetes", "v1.34.4", infoOnly("v1.34.4"), map[string]string{
		"go.mod":                          kubernetesGoMod,
		"cmd/kube-apiserver/apiserver.go": "package main\n\nfunc main() {}\n",
	})

	for _, command := range []string{"kube-apiserver", "kubectl"} {
		stdout, stderr, err := s.run(t, []string{"KUBE_VERSION=v1.34.4"}, "kube/build-apiserver.sh", command)
		require.NoError(t, err, "stderr: %s", stderr)
		var ldflags string
		for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
			ldflags += " -X " + pkg + ".gitVersion=v1.34.4 -X " + pkg + ".gitMajor=1 -X " + pkg + ".gitMinor=34"
		}
		assert.Equal(t, "gomod: "+s.gomod("k8s.io/kubernetes", "v1.34.4")+"\n"+
			"replace: k8s.io/api=k8s.io/api@v0.34.4\n"+
			"replace: k8s.io/client-go=k8s.io/client-go@v0.34.4\n"+
			"replace: k8s.io/component-base=k8s.io/component-base@v0.34.4\n"+
			"ldflags: -s -w"+ldflags+"\n", stdout, command)
	}
}

// thanosGoMod has replace directives as Thanos' go.mod does (a block with comments and blank
// lines), and one alone with a version on its left.
const thanosGoMod = `module github.com/thanos-io/thanos

go 1.25.0

require (
	github.com/prometheus/prometheus v0.309.1
	google.golang.org/grpc v1.75.0
)

replace (
	// Pinning capnp: see upstream.
	capnproto.org/go/capnp/v3 => capnproto.org/go/capnp/v3 v3.0.0-alpha.30

	// A fork with a custom dialer.
	github.com/bradfitz/gomemcache => github.com/themihai/gomemcache v0.0.0-20180902122335-24332e2d58ab

	gopkg.in/alecthomas/kingpin.v2 => github.com/alecthomas/kingpin v1.3.8-0.20210301060133-17f40c25f497 // the latest commit
)

replace github.com/sercand/kuberesolver/v4 v4.0.0 => github.com/sercand/kuberesolver/v5 v5.1.1
`

func TestThanosPlan(t *testing.T) {
	s := newScripts(t)
	s.proxy.add(t, "github.com/thanos-io/thanos", "v0.42.0", infoOnly("v0.42.0"), map[string]string{"go.mod": thanosGoMod})
	s.proxy.add(t, "github.com/thanos-io/thanos", "v0.43.0", infoOnly("v0.43.0"), map[string]string{
		"go.mod": strings.Replace(thanosGoMod, "replace github.com/sercand/kuberesolver/v4 v4.0.0 => github.com/sercand/kuberesolver/v5 v5.1.1",
			"replace github.com/efficientgo/core => ../core", 1),
	})

	stdout, stderr, err := s.run(t, []string{"THANOS_VERSION=v0.42.0"}, "thanos/build.sh")
	require.NoError(t, err, "stderr: %s", stderr)
	var ldflags string
	for _, v := range []string{"Version=0.42.0", "Branch=HEAD", "Revision=v0.42.0", "BuildUser=otelcol-gpu"} {
		ldflags += " -X github.com/prometheus/common/version." + v
	}
	assert.Equal(t, "gomod: "+s.gomod("github.com/thanos-io/thanos", "v0.42.0")+"\n"+
		"replace: capnproto.org/go/capnp/v3=capnproto.org/go/capnp/v3@v3.0.0-alpha.30\n"+
		"replace: github.com/bradfitz/gomemcache=github.com/themihai/gomemcache@v0.0.0-20180902122335-24332e2d58ab\n"+
		"replace: gopkg.in/alecthomas/kingpin.v2=github.com/alecthomas/kingpin@v1.3.8-0.20210301060133-17f40c25f497\n"+
		"replace: github.com/sercand/kuberesolver/v4@v4.0.0=github.com/sercand/kuberesolver/v5@v5.1.1\n"+
		"ldflags: -s -w"+ldflags+"\n", stdout)

	// A replacement by a directory cannot build from the zip: named, and the build stops.
	stdout, stderr, err = s.run(t, []string{"THANOS_VERSION=v0.43.0"}, "thanos/build.sh")
	assert.Error(t, err)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "replaces a module by a directory (github.com/efficientgo/core=../core)")
}

func TestPrometheusPlan(t *testing.T) {
	s := newScripts(t)
	stdout, stderr, err := s.run(t, []string{"PROMETHEUS_VERSION=v0.316.0"}, "prometheus/build.sh", "promtool")
	require.NoError(t, err, "stderr: %s", stderr)
	var ldflags string
	for _, v := range []string{"Version=3.16.0", "Branch=HEAD", "Revision=v0.316.0", "BuildUser=otelcol-gpu"} {
		ldflags += " -X github.com/prometheus/common/version." + v
	}
	assert.Equal(t, "tags: remove_all_sd,enable_kubernetes_sd\nldflags: -s -w"+ldflags+"\n", stdout)
}

// TestPlanIgnoresCache: a cached binary is not a plan; the plan is computed all the same.
func TestPlanIgnoresCache(t *testing.T) {
	s := newScripts(t)
	cached := filepath.Join(t.TempDir(), "prometheus-3.16.0-kubernetes-sd", "prometheus")
	require.NoError(t, os.MkdirAll(filepath.Dir(cached), 0o755))
	require.NoError(t, os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o700)) //nolint:gosec // G306: it stands for an executable
	stdout, _, err := s.run(t, []string{"PROMETHEUS_CACHE_DIR=" + filepath.Dir(filepath.Dir(cached))}, "prometheus/build.sh")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(stdout, "tags: "), "plan mode printed %q", stdout)

	var exitErr *exec.ExitError
	_, _, err = s.run(t, nil, "prometheus/build.sh", "prometheus2")
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 2, exitErr.ExitCode(), "an unknown command is a usage error")
}
