// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package demonode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
)

const slurmJobsFile = "../../distro/scenarios/slurm/dgx-a100-slurm.yaml"

func eightGPUs() map[int]GPU {
	gpus := map[int]GPU{}
	for i := range 8 {
		gpus[i] = GPU{UUID: fmt.Sprintf("GPU-%d", i)}
	}
	return gpus
}

// TestStartSlurm reads the Slurm demo node's tree as the agent will, through internal/slurm's
// ProcSteps on its /proc: each GPU process is in its job's step with the job's fields and GPUs
// (the node's indexes, not CUDA_VISIBLE_DEVICES' renumbering), the host process in none.
func TestStartSlurm(t *testing.T) {
	jobs, err := LoadSlurmJobs(slurmJobsFile)
	require.NoError(t, err)
	root := filepath.Join(t.TempDir(), "node")
	require.NoError(t, StartSlurm(root, jobs, eightGPUs()))

	steps, err := slurm.NewProcSteps(filepath.Join(root, "proc"), slurm.CgroupLayout{})
	require.NoError(t, err)
	type want struct {
		uid, step, task string
		job             slurm.Job
	}
	alice := func(id, arrayTask string, gpu int) slurm.Job {
		return slurm.Job{ID: id, User: "alice", Account: "physics", Partition: "gpu", Name: "sweep", ArrayJobID: "2001", ArrayTaskID: arrayTask, GPUs: []int{gpu}, FromEnviron: true}
	}
	bob := func(gpus ...int) slurm.Job {
		return slurm.Job{ID: "2010", User: "bob", Account: "chemistry", Partition: "gpu", Name: "md-sim", GPUs: gpus, FromEnviron: true}
	}
	dave := slurm.Job{ID: "2030", User: "dave", Account: "serving", Partition: "gpu", Name: "serve", GPUs: []int{5, 6}, FromEnviron: true}
	erin := slurm.Job{ID: "2040", User: "erin", Account: "chemistry", Partition: "gpu", Name: "llm-eval", GPUs: []int{7}, FromEnviron: true}
	for pid, w := range map[int]want{
		31001: {"4242", "batch", "0", alice("2002", "0", 0)}, // the array's task 0: a job of its own
		31101: {"4242", "batch", "0", alice("2001", "1", 1)}, // the last task keeps the array's id
		32001: {"4243", "batch", "0", bob(2, 3)},             // the batch step: the job's GPUs
		32010: {"4243", "0", "0", bob(2)},                    // each srun step its own
		32011: {"4243", "1", "0", bob(3)},
		33001: {"4244", "interactive", "0", slurm.Job{ID: "2020", User: "carol", Account: "physics", Partition: "interactive", Name: "interactive", GPUs: []int{4}, FromEnviron: true}},
		34001: {"4245", "0", "0", dave}, // srun outside an allocation: its step's GPUs only
		34002: {"4245", "0", "1", dave},
		35001: {"4246", "batch", "0", erin},
		35002: {"4246", "extern", "0", erin},
	} {
		p, ok, stepErr := steps.StepOf(pid)
		require.NoError(t, stepErr, "pid %d", pid)
		require.True(t, ok, "pid %d is in a step", pid)
		assert.Equal(t, slurm.Location{CgroupVersion: 1, UID: w.uid, JobID: w.job.ID, Step: w.step, Task: w.task}, p.Location, "pid %d", pid)
		assert.Equal(t, w.job, p.Job, "pid %d", pid)
	}
	_, ok, err := steps.StepOf(42001)
	require.NoError(t, err)
	assert.False(t, ok, "gpu-burn runs outside any job")
	assert.Equal(t, 9, steps.Cached(), "each step's environment read once")

	// The freezer (proctrack/cgroup) holds the step, the devices controller each task, as on the
	// real slurmd (internal/slurm's captures); the task receiver's controllers the task.
	assert.Equal(t, "34001\n34002\n", readFile(t, root, "sys/fs/cgroup/freezer/slurm/uid_4245/job_2030/step_0/cgroup.procs"))
	assert.Equal(t, "34002\n", readFile(t, root, "sys/fs/cgroup/devices/slurm/uid_4245/job_2030/step_0/task_1/cgroup.procs"))
	assert.Equal(t, "34002\n", readFile(t, root, "sys/fs/cgroup/memory/slurm/uid_4245/job_2030/step_0/task_1/cgroup.procs"))
	assert.Contains(t, readFile(t, root, "proc/34002/environ"), "CUDA_VISIBLE_DEVICES=0,1\x00", "renumbered from 0, as ConstrainDevices makes it")
	assert.Contains(t, readFile(t, root, "proc/driver/nvidia/gpus/0000:08:00.0/information"), "GPU-7")
}

func readFile(t *testing.T, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(elem...))
	require.NoError(t, err)
	return string(b)
}

func TestStartSlurmUnknownGPU(t *testing.T) {
	jobs := &SlurmJobs{Node: "n1", Jobs: []SlurmJob{{ID: 1, User: "u", UID: 1000, Steps: []SlurmStep{{Step: "0", GPUs: []int{8}, PIDs: []int{10}}}}}}
	err := StartSlurm(filepath.Join(t.TempDir(), "node"), jobs, eightGPUs())
	assert.EqualError(t, err, "jobs[0].steps[0].gpus: no GPU 8 on the node (it has 8)")
}

func TestLoadSlurmJobsErrors(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"unknown key": {"node: n1\njobs: [{id: 1, user: u, uid: 1, steps: [{step: batch, pids: [1]}], qos: high}]\n", "field qos not found"},
		"no node":     {"jobs: []\n", "node: the node's Slurm name is required"},
		"bad step":    {"node: n1\njobs: [{id: 1, user: u, uid: 1, steps: [{step: step_0, pids: [1]}]}]\n", `jobs[0].steps[0].step: "step_0" is no step Slurm names`},
		"batch gpus":  {"node: n1\njobs: [{id: 1, user: u, uid: 1, steps: [{step: batch, gpus: [0], pids: [1]}]}]\n", "jobs[0].steps[0].gpus: the batch step runs with the job's GPUs"},
		"no pids":     {"node: n1\njobs: [{id: 1, user: u, uid: 1, steps: [{step: \"0\"}]}]\n", "jobs[0].steps[0].pids: a step runs at least one task"},
		"no steps":    {"node: n1\njobs: [{id: 1, user: u, uid: 1}]\n", "jobs[0].steps: a job on the node has at least one step"},
		"twice":       {"node: n1\njobs: [{id: 1, user: u, uid: 1, steps: [{step: batch, pids: [1]}]}, {id: 1, user: u, uid: 1, steps: [{step: batch, pids: [2]}]}]\n", "jobs[1].id: job 1 is listed twice"},
		"pid taken":   {"node: n1\nhost_processes: [{pid: 1, comm: x}]\njobs: [{id: 1, user: u, uid: 1, steps: [{step: batch, pids: [1]}]}]\n", "jobs[0].steps[0]: pid 1 is already host_processes's"},
		"no user":     {"node: n1\njobs: [{id: 1, steps: [{step: batch, pids: [1]}]}]\n", "jobs[0]: user and uid (a positive number) are required"},
		"bad array":   {"node: n1\njobs: [{id: 1, user: u, uid: 1, array: {task_id: 0}, steps: [{step: batch, pids: [1]}]}]\n", "jobs[0].array.job_id: the array's job id is a positive number, got 0"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jobs.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
			_, err := LoadSlurmJobs(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
