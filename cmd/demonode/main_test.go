// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

const (
	scenario = "../../distro/scenarios/dgx-a100-demo.yaml"
	podsFile = "../../distro/scenarios/pods/dgx-a100-demo.yaml"
)

// demos are make demo's node and make demo-dcgm's, scenario and pods file.
var demos = map[string][2]string{
	"dgx-a100": {scenario, podsFile},
	"dgx-h100": {"../../distro/scenarios/dgx-h100-demo.yaml", "../../distro/scenarios/pods/dgx-h100-demo.yaml"},
}

// TestDemoPodsOwnTheScenarioProcesses: every GPU process of each demo scenario belongs to a pod
// container or a host process of its pods file, so the demo's attribution has no accidental
// externals.
func TestDemoPodsOwnTheScenarioProcesses(t *testing.T) {
	for name, demo := range demos {
		t.Run(name, func(t *testing.T) { podsOwnProcesses(t, demo[0], demo[1]) })
	}
}

func podsOwnProcesses(t *testing.T, scenario, podsFile string) {
	pods, err := demonode.LoadPods(podsFile)
	require.NoError(t, err)
	batch, err := gpureceivertest.SimulatedBatch(scenario)
	require.NoError(t, err)
	var owned []int
	for _, p := range pods.Pods {
		for _, c := range p.Containers {
			owned = append(owned, c.PIDs...)
		}
	}
	for _, p := range pods.HostProcesses {
		owned = append(owned, p.PID)
	}
	seen := 0
	for i := 0; i < batch.ResourceMetrics().Len(); i++ {
		ms := batch.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if m := ms.At(j); m.Name() == "gpu_process_memory_used_bytes" {
				for k := 0; k < m.Gauge().DataPoints().Len(); k++ {
					pid, _ := m.Gauge().DataPoints().At(k).Attributes().Get("pid")
					n, err := strconv.Atoi(pid.Str())
					require.NoError(t, err)
					assert.Contains(t, owned, n, "GPU process %d has no owner in %s", n, podsFile)
					seen++
				}
			}
		}
	}
	assert.Positive(t, seen)
}

// TestRun lays out the node for each demo scenario, whose GPUs every device of the pods file
// names (8, GPU 6 in MIG mode with two slices, as internal/demonode's tests take them), and runs
// the command beside it.
func TestRun(t *testing.T) {
	for name, demo := range demos {
		t.Run(name, func(t *testing.T) {
			batch, err := gpureceivertest.SimulatedBatch(demo[0])
			require.NoError(t, err)
			gpus := gpureceivertest.GPUs(batch)
			require.Len(t, gpus, 8)
			require.Len(t, gpus[6].MIG, 2, "GPU 6 is in MIG mode")

			code, err := run(demo[0], demo[1], []string{"true"})
			require.NoError(t, err)
			assert.Zero(t, code)
		})
	}
}
