// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestDemoXID79 runs `make demo`'s configuration with a scenario that makes GPU 3 fall off the
// bus (XID 79) a second in, under a real Prometheus: the XID is counted once, GPU 3 is down,
// the seven others keep reporting, and the XID leaves as a log record.
func TestDemoXID79(t *testing.T) {
	root := repoRoot(t)
	metrics, console := startDemo(t, filepath.Join(root, "receiver", "gpureceiver", "testdata", "scenarios", "xid79.yaml"),
		filepath.Join("testdata", "no-pods.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task::collection_interval=1s",
		"exporters::debug::verbosity=detailed",
	)

	api := startPrometheus(t, map[string]string{"demo": metrics})

	eventually(t, "XID 79 on GPU 3 in Prometheus", func() bool {
		return series(t, api, `gpu_xid_errors_total{minor_number="3",xid="79",simulated="true"} == 1`) == 1 &&
			series(t, api, `gpu_up{minor_number="3"} == 0`) == 1
	})
	// Still counted once after more collections: the NVML event and any kernel-log copy of it
	// are one occurrence.
	eventually(t, "further collections", func() bool {
		return series(t, api, `increase(collector_iteration_count_total{name="gpu"}[5s]) > 2`) == 1
	})
	assert.Equal(t, 1, series(t, api, `gpu_xid_errors_total{minor_number="3",xid="79"} == 1`))
	assert.Equal(t, 1, series(t, api, `sum(gpu_xid_errors_total) == 1`), "no XID on any other GPU")
	assert.Equal(t, 7, series(t, api, `gpu_up == 1`), "the other GPUs keep reporting")
	assert.Equal(t, 7, series(t, api, `gpu_utilization{vender="nvidia"} == 40`), "the other GPUs' utilization")
	assert.Positive(t, series(t, api, `node_load1`), "the task receiver keeps reporting")

	// The debug exporter prints each log record's body; the occurrence is logged once.
	eventually(t, "the XID log record on the console", func() bool {
		return strings.Contains(console.Output(), "XID 79 on GPU 3 ")
	})
	assert.Equal(t, 1, strings.Count(console.Output(), "XID 79 on GPU 3 "), "one log record for one occurrence")
}

// startDemo runs `make demo`: the demo node (internal/demonode, as cmd/demonode lays it out) for
// scenario with podsFile's pods, and the collector on distro/demo.yaml beside it, with the GPU
// scenario and --set overrides. It returns the metrics URL and the console.
func startDemo(t *testing.T, scenario, podsFile string, sets ...string) (string, *stack.Process) {
	t.Helper()
	return startDemoWith(t, "demo.yaml", scenario, podsFile, sets...)
}

// startDemoWith is startDemo with another configuration of distro/ (demo-dcgm.yaml).
func startDemoWith(t *testing.T, config, scenario, podsFile string, sets ...string) (string, *stack.Process) {
	t.Helper()
	t.Setenv("OTELCOL_GPU_DEMO_ROOT", startDemoNode(t, scenario, podsFile))
	return startCollectorWithOutput(t, filepath.Join(repoRoot(t), "distro", config),
		append([]string{"receivers::gpu::scenario=" + scenario}, sets...)...)
}

// startDemoNode lays out the demo node (internal/demonode) for scenario's GPUs and podsFile's
// pods, and returns its root: the jobs' containers and a pod-resources socket there.
func startDemoNode(t *testing.T, scenario, podsFile string) string {
	t.Helper()
	pods, err := demonode.LoadPods(podsFile)
	require.NoError(t, err)
	sc, err := gpuscenario.Load(scenario)
	require.NoError(t, err)
	gpus, _, err := demonode.ScenarioGPUs(sc)
	require.NoError(t, err)
	// Short: the pod-resources socket lives below it (unix socket paths are limited to 108 bytes).
	dir, err := os.MkdirTemp("", "demo") //nolint:usetesting // short, as said above
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	node, err := demonode.Start(filepath.Join(dir, "node"), pods, gpus)
	require.NoError(t, err)
	t.Cleanup(node.Close)
	return node.Root
}
