// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

// The real-node tests (build tag realnode, root): otelcol-gpu installed on a real Kubernetes
// node the way deploy/README.md tells an operator to, on simulated GPUs that real pods hold, and
// checked there: the agent, the gateway, a Prometheus 3 with the shipped scrape jobs and rules,
// what the agent can do to its host, restarts, and the edge overlay's queue.
//
//	sudo go test -tags realnode ./test/realnode/
//
// Binaries: the Kubernetes ones of test/kube/build-apiserver.sh, Prometheus 3 of
// test/prometheus/build.sh and Helm of test/helm/build-helm.sh (PROMETHEUS_BIN and HELM_BIN,
// else what the scripts print), the image archive of `make image` (OTELCOL_IMAGE, else
// bin/otelcol-gpu-image.tar).
package realnode_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"text/template"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode/gpuplugin"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

var (
	node *realnode.Node
	// gpus are the simulated GPUs of testdata/scenario.yaml, by index.
	gpus map[int]demonode.GPU
)

func TestMain(m *testing.M) {
	os.Exit(realnode.Main(m, options, func(n *realnode.Node) { node = n }))
}

// The simulated GPUs as the node's device plugin advertises them.
const (
	gpuResource = "nvidia.com/gpu"
	migResource = "nvidia.com/mig-3g.20gb"
	// GPU 2 is shared by time-slicing, as two replicas <uuid>::0 and <uuid>::1 of nvidia.com/gpu
	// (NVIDIA's plugin with renameByDefault off).
	timeSlicedGPU = 2
	replicas      = 2
)

func options() (realnode.Options, error) {
	var err error
	if gpus, err = scenarioGPUs(); err != nil {
		return realnode.Options{}, err
	}
	// Prometheus discovers the agents from outside the cluster, with a user of its own.
	return realnode.Options{Users: []string{"prometheus"}, Devices: deviceResources(gpus)}, nil
}

// scenarioGPUs reads the scenario's GPUs (UUIDs, MIG slices) from the scenario. They do not
// depend on the processes: any running PID will do for them.
func scenarioGPUs() (map[int]demonode.GPU, error) {
	data, err := renderScenario(func(string) (int, error) { return os.Getpid(), nil })
	if err != nil {
		return nil, err
	}
	sc, err := gpuscenario.Parse(data, "")
	if err != nil {
		return nil, err
	}
	ids, _, err := demonode.ScenarioGPUs(sc)
	return ids, err
}

// deviceResources: whole GPUs, then the time-slicing replicas, under nvidia.com/gpu (the plugin
// prefers the first, so a pod is given whole GPUs while any is free); MIG slices under their
// profile's name.
func deviceResources(gpus map[int]demonode.GPU) []gpuplugin.Resource {
	whole, mig := gpuplugin.Resource{Name: gpuResource}, gpuplugin.Resource{Name: migResource}
	var shared []string
	for i := range len(gpus) {
		switch g := gpus[i]; {
		case slices.Contains(draGPUs, i): // the DRA driver's
		case len(g.MIG) > 0:
			mig.IDs = append(mig.IDs, g.MIG...)
		case i == timeSlicedGPU:
			for r := range replicas {
				shared = append(shared, fmt.Sprintf("%s::%d", g.UUID, r))
			}
		default:
			whole.IDs = append(whole.IDs, g.UUID)
		}
	}
	whole.IDs = append(whole.IDs, shared...)
	return []gpuplugin.Resource{whole, mig}
}

// renderScenario is testdata/scenario.yaml with each {{pid "..."}} replaced by pid's answer.
func renderScenario(pid func(name string) (int, error)) ([]byte, error) {
	return render("scenario.yaml", template.FuncMap{"pid": pid})
}

// renderPods is testdata/pods.yaml with each {{uuid N}} replaced by GPU N's UUID.
func renderPods() ([]byte, error) {
	return render("pods.yaml", template.FuncMap{"uuid": func(i int) string { return gpus[i].UUID }})
}

func render(name string, funcs template.FuncMap) ([]byte, error) {
	tmpl, err := template.New(name).Funcs(funcs).ParseFiles(filepath.Join(testdata(), name))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, nil); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func testdata() string { return filepath.Join(stack.RepoRoot(), "test", "realnode", "testdata") }
