// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

const (
	scenario = "../../distro/scenarios/dgx-a100-demo.yaml"
	podsFile = "../../distro/scenarios/pods/dgx-a100-demo.yaml"
	// make demo-slurm's node: its scenario and Slurm jobs file.
	slurmScenario = "../../distro/scenarios/dgx-a100-slurm.yaml"
	slurmJobsFile = "../../distro/scenarios/slurm/dgx-a100-slurm.yaml"
)

// demos are make demo's node, make demo-dcgm's and make demo-amd's, scenario and pods file.
var demos = map[string][2]string{
	"dgx-a100": {scenario, podsFile},
	"dgx-h100": {"../../distro/scenarios/dgx-h100-demo.yaml", "../../distro/scenarios/pods/dgx-h100-demo.yaml"},
	"mi300x":   {"../../distro/scenarios/mi300x-demo.yaml", "../../distro/scenarios/pods/mi300x-demo.yaml"},
}

// demoBatch is a collection of the gpu receiver on a demo's GPUs: the simulated backend on an
// NVIDIA scenario, the amdgpu backend on an AMD scenario's files at its start.
func demoBatch(t *testing.T, scenario string) pmetric.Metrics {
	_, amd := scenarioGPUs(t, scenario)
	if amd == nil {
		batch, simErr := gpureceivertest.SimulatedBatch(scenario)
		require.NoError(t, simErr)
		return batch
	}
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, amd.Node(0)))
	batch, err := gpureceivertest.AMDBatch(root)
	require.NoError(t, err)
	return batch
}

// scenarioGPUs are the GPUs of a scenario file as demonode reads them.
func scenarioGPUs(t *testing.T, scenario string) (map[int]demonode.GPU, *amdgpufixture.Player) {
	t.Helper()
	sc, err := gpuscenario.Load(scenario)
	require.NoError(t, err)
	gpus, amd, err := demonode.ScenarioGPUs(sc)
	require.NoError(t, err)
	return gpus, amd
}

// TestIdentitiesFromTheScenario: the UUIDs (and MIG UUIDs) demonode reads from each demo
// scenario, without running the receiver, are those the gpu receiver reports for it.
func TestIdentitiesFromTheScenario(t *testing.T) {
	for name, demo := range demos {
		t.Run(name, func(t *testing.T) {
			gpus, _ := scenarioGPUs(t, demo[0])
			reported := gpureceivertest.GPUs(demoBatch(t, demo[0]))
			require.Len(t, reported, len(gpus))
			for i, g := range gpus {
				assert.Equal(t, reported[i].UUID, g.UUID, "GPU %d", i)
				assert.Equal(t, reported[i].MIG, g.MIG, "GPU %d's MIG instances", i)
			}
		})
	}
}

// TestDemoPodsOwnTheScenarioProcesses: every GPU process of each demo scenario belongs to a pod
// container or a host process of its pods file, so the demo's attribution has no accidental
// externals.
func TestDemoPodsOwnTheScenarioProcesses(t *testing.T) {
	for name, demo := range demos {
		t.Run(name, func(t *testing.T) {
			pods, err := demonode.LoadPods(demo[1])
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
			ownProcesses(t, demo[0], demo[1], owned)
		})
	}
}

// TestSlurmJobsOwnTheScenarioProcesses: every GPU process of make demo-slurm's scenario is a
// task of a step of its jobs file or a host process.
func TestSlurmJobsOwnTheScenarioProcesses(t *testing.T) {
	jobs, err := demonode.LoadSlurmJobs(slurmJobsFile)
	require.NoError(t, err)
	var owned []int
	for _, j := range jobs.Jobs {
		for _, s := range j.Steps {
			owned = append(owned, s.PIDs...)
		}
	}
	for _, p := range jobs.HostProcesses {
		owned = append(owned, p.PID)
	}
	ownProcesses(t, slurmScenario, slurmJobsFile, owned)
}

// ownProcesses checks that each GPU process of the scenario is one of owned, the pids of file.
func ownProcesses(t *testing.T, scenario, file string, owned []int) {
	batch := demoBatch(t, scenario)
	seen := 0
	for i := 0; i < batch.ResourceMetrics().Len(); i++ {
		ms := batch.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if m := ms.At(j); m.Name() == "gpu_process_memory_used_bytes" {
				for k := 0; k < m.Gauge().DataPoints().Len(); k++ {
					pid, _ := m.Gauge().DataPoints().At(k).Attributes().Get("pid")
					n, err := strconv.Atoi(pid.Str())
					require.NoError(t, err)
					assert.Contains(t, owned, n, "GPU process %d has no owner in %s", n, file)
					seen++
				}
			}
		}
	}
	assert.Positive(t, seen)
}

// TestRun lays out the node for each demo scenario, whose GPUs every device of the pods file
// names (8; on the NVIDIA demos GPU 6 in MIG mode with two slices, as internal/demonode's tests
// take them; on the AMD demo each GPU by its PCI address), and runs the command beside it.
func TestRun(t *testing.T) {
	for name, demo := range demos {
		t.Run(name, func(t *testing.T) {
			gpus, amd := scenarioGPUs(t, demo[0])
			require.Len(t, gpus, 8)
			if amd == nil {
				require.Len(t, gpus[6].MIG, 2, "GPU 6 is in MIG mode")
			} else {
				assert.Equal(t, "0000:05:00.0", gpus[0].PCIAddress)
			}

			code, err := run(demo[0], nodeFiles{pods: demo[1]}, time.Second, []string{"true"})
			require.NoError(t, err)
			assert.Zero(t, code)
		})
	}
}

// TestRunAMD: the command runs beside the AMD node's files (the amdgpu backend's auto choice
// finds them under OTELCOL_GPU_DEMO_ROOT), and the exit status is the command's.
func TestRunAMD(t *testing.T) {
	demo := demos["mi300x"]
	code, err := run(demo[0], nodeFiles{pods: demo[1]}, time.Second, []string{"sh", "-c", `test -e "$OTELCOL_GPU_DEMO_ROOT/dev/kfd" && test -e "$OTELCOL_GPU_DEMO_ROOT/sys/class/drm/card0/device/gpu_metrics" && ! test -e "$OTELCOL_GPU_DEMO_ROOT/proc/driver/nvidia" && exit 3`})
	require.NoError(t, err)
	assert.Equal(t, 3, code)
}

// TestRunSlurm: with -slurm the command runs beside a Slurm node (its steps' cgroups under
// /sys/fs/cgroup's v1 controllers, no kubelet socket), and the exit status is the command's.
func TestRunSlurm(t *testing.T) {
	code, err := run(slurmScenario, nodeFiles{slurm: slurmJobsFile}, time.Second, []string{"sh", "-c", `test -e "$OTELCOL_GPU_DEMO_ROOT/sys/fs/cgroup/freezer/slurm/uid_4243/job_2010/step_1/cgroup.procs" && ! test -e "$OTELCOL_GPU_DEMO_ROOT/var/lib/kubelet" && exit 3`})
	require.NoError(t, err)
	assert.Equal(t, 3, code)
}
