// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
)

// v2Tree makes the directories cgroup_v2.c makes under a slice for two jobs: the scope with its
// system cgroup (slurmstepd's own, 25.11), and per job its steps, each with slurm (slurmstepd) and
// user/task_<n> or user/task_special. job names the job directory from the job id (job_<id>, or
// the SLUID in 26.05).
func v2Tree(t *testing.T, slice string, job func(id string) string) string {
	t.Helper()
	mount := t.TempDir()
	scope := filepath.Join(mount, slice, "slurmstepd.scope")
	dirs := []string{
		"system",
		job("42") + "/step_batch/slurm", job("42") + "/step_batch/user/task_0",
		job("42") + "/step_extern/slurm", job("42") + "/step_extern/user/task_special",
		job("42") + "/step_0/slurm", job("42") + "/step_0/user/task_0", job("42") + "/step_0/user/task_1",
		job("43") + "/step_interactive/slurm", job("43") + "/step_interactive/user/task_0",
		job("43") + "/step_1+0/slurm", job("43") + "/step_1+1/user/task_0",
	}
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(scope, d), 0o755))
	}
	return mount
}

// stepsOfTree parses every directory of a cgroup tree as a process's cgroup path would name it.
func stepsOfTree(t *testing.T, mount string, layout CgroupLayout) []string {
	t.Helper()
	var found []string
	require.NoError(t, filepath.WalkDir(mount, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(path, mount))
		if l, ok := layout.ParsePath(rel); ok {
			found = append(found, l.Key()+" "+l.Task)
		}
		return nil
	}))
	sort.Strings(found)
	return found
}

func TestV2Trees(t *testing.T) {
	want := func(job42, job43 string) []string {
		w := []string{
			job42 + ".0 0", job42 + ".0 1", job42 + ".0 slurm",
			job42 + ".batch 0", job42 + ".batch slurm",
			job42 + ".extern slurm", job42 + ".extern special",
			job43 + ".1+0 slurm", job43 + ".1+1 0",
			job43 + ".interactive 0", job43 + ".interactive slurm",
		}
		sort.Strings(w)
		return w
	}
	jobIDPaths := func(id string) string { return "job_" + id }

	// 22.05 to 25.05, and 26.05 with CgroupJobIdPaths=yes.
	assert.Equal(t, want("42", "43"), stepsOfTree(t, v2Tree(t, DefaultSlice, jobIDPaths), CgroupLayout{}))

	// 25.11's CgroupSlice: the default layout finds nothing under another slice.
	tree := v2Tree(t, "gpu.slice", jobIDPaths)
	assert.Empty(t, stepsOfTree(t, tree, CgroupLayout{}))
	assert.Equal(t, want("42", "43"), stepsOfTree(t, tree, CgroupLayout{Slice: "gpu.slice"}))

	// 26.05: job directories named by SLUID.
	sluids := map[string]string{"42": "s0CQ1V4T1BE000", "43": "s0CQ1V4T1BE001"}
	tree = v2Tree(t, DefaultSlice, func(id string) string { return sluids[id] })
	assert.Equal(t, want(sluids["42"], sluids["43"]), stepsOfTree(t, tree, CgroupLayout{}))
}

// fakeProc writes the /proc entries of processes: cgroup lines and, when env is not nil, the
// environment.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) fakeProc {
	return fakeProc{t: t, root: t.TempDir()}
}

func (p fakeProc) add(pid int, cgroup string, env []string) {
	p.t.Helper()
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	require.NoError(p.t, os.MkdirAll(dir, 0o755))
	require.NoError(p.t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o600))
	if env != nil {
		require.NoError(p.t, os.WriteFile(filepath.Join(dir, "environ"), []byte(strings.Join(env, "\x00")+"\x00"), 0o600))
	}
}

// v1Cgroup is a step's /proc/<pid>/cgroup on a hybrid node as proctrack/cgroup (freezer) and
// task/cgroup (cpuset, memory, devices) place it.
func v1Cgroup(job, step, task string) string {
	stepDir := "/slurm/uid_1000/job_" + job + "/step_" + step
	return "12:pids:/\n11:freezer:" + stepDir + "\n7:memory:" + stepDir + "/task_" + task +
		"\n5:devices:" + stepDir + "\n3:cpuset:" + stepDir + "\n1:name=systemd:/\n0::/\n"
}

func TestProcSteps(t *testing.T) {
	proc := newFakeProc(t)
	jobEnv := []string{
		"PATH=/usr/bin", "SLURM_JOB_ID=42", "SLURM_JOB_USER=alice", "SLURM_JOB_ACCOUNT=physics",
		"SLURM_JOB_PARTITION=gpu", "SLURM_JOB_NAME=train=big", "SLURM_JOB_GPUS=1,3",
		"SLURM_ARRAY_JOB_ID=40", "SLURM_ARRAY_TASK_ID=2", "CUDA_VISIBLE_DEVICES=0,1",
	}
	proc.add(100, v1Cgroup("42", "batch", "0"), jobEnv)
	proc.add(101, v1Cgroup("42", "0", "0"), append(jobEnv, "SLURM_STEP_GPUS=3"))
	proc.add(102, v1Cgroup("42", "0", "1"), nil) // environ unreadable: the step's cache
	proc.add(103, v1Cgroup("44", "0", "0"), nil) // environ unreadable, nothing cached
	proc.add(104, "0::/user.slice/user-1000.slice/session-1.scope\n", []string{"SLURM_JOB_ID=42"})
	proc.add(105, "0::/system.slice/slurmstepd.scope/"+sluid+"/step_1/user/task_0\n", nil)
	proc.add(106, v1Cgroup("45", "0", "0"), []string{"SLURM_JOB_ID=46"}) // moved in from job 46
	proc.add(107, v1Cgroup("47", "0", "0"), []string{"SLURM_JOB_ID=47", "SLURM_JOB_USER=bob", "SLURM_STEP_GPUS=0,gpu1"})

	steps, err := NewProcSteps(proc.root, CgroupLayout{})
	require.NoError(t, err)

	p, ok, err := steps.StepOf(100)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Process{
		Location: Location{CgroupVersion: 1, UID: "1000", JobID: "42", Step: "batch", Task: "0"},
		Job: Job{
			ID: "42", User: "alice", Account: "physics", Partition: "gpu", Name: "train=big",
			ArrayJobID: "40", ArrayTaskID: "2", GPUs: []int{1, 3}, FromEnviron: true,
		},
	}, p)

	p, _, err = steps.StepOf(101)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, p.Job.GPUs, "a numbered step's GPUs are its own")
	p, _, err = steps.StepOf(102)
	require.NoError(t, err)
	assert.Equal(t, Job{
		ID: "42", User: "alice", Account: "physics", Partition: "gpu", Name: "train=big",
		ArrayJobID: "40", ArrayTaskID: "2", GPUs: []int{3}, FromEnviron: true,
	}, p.Job, "the step's environment, read from its first process")
	assert.Equal(t, "1", p.Task)

	p, ok, err = steps.StepOf(103)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Job{ID: "44"}, p.Job, "the cgroup path's job id when the environment is unreadable")

	_, ok, err = steps.StepOf(104)
	require.NoError(t, err)
	assert.False(t, ok, "outside Slurm's cgroups, whatever the environment says")

	p, ok, err = steps.StepOf(105)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, sluid, p.SLUID)
	assert.Equal(t, Job{}, p.Job, "26.05's SLUID path names no job id")

	p, _, err = steps.StepOf(106)
	require.NoError(t, err)
	assert.Equal(t, Job{ID: "45"}, p.Job, "another job's environment is not this step's")

	p, _, err = steps.StepOf(107)
	require.NoError(t, err)
	assert.Equal(t, Job{ID: "47", User: "bob", FromEnviron: true}, p.Job, "a malformed GPU list costs the step its GPUs only")
	assert.Equal(t, int64(1), steps.MalformedGPULists())

	_, _, err = steps.StepOf(999)
	require.Error(t, err)

	// Read once per step: a changed environment is not read again while the step is looked up.
	assert.Equal(t, 3, steps.Cached())
	proc.add(100, v1Cgroup("42", "batch", "0"), []string{"SLURM_JOB_ID=42", "SLURM_JOB_USER=mallory"})
	steps.Sweep()
	p, _, err = steps.StepOf(100)
	require.NoError(t, err)
	assert.Equal(t, "alice", p.Job.User)
	// Two sweeps without a lookup: the step is gone, its environment forgotten.
	steps.Sweep()
	assert.Equal(t, 1, steps.Cached())
	steps.Sweep()
	assert.Equal(t, 0, steps.Cached())
	p, _, err = steps.StepOf(100)
	require.NoError(t, err)
	assert.Equal(t, "mallory", p.Job.User)
}

func TestJobFromEnviron(t *testing.T) {
	_, err := JobFromEnviron(map[string]string{"SLURM_JOB_USER": "alice"}, "0")
	require.EqualError(t, err, "environment has no SLURM_JOB_ID")

	j, err := JobFromEnviron(map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_NAME": "x"}, "0")
	require.NoError(t, err)
	assert.Nil(t, j.GPUs, "a step started with --gres=none keeps the job's list but holds no GPU")

	j, err = JobFromEnviron(map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_GPUS": "2", "SLURM_JOB_GPUS": "0,1"}, "interactive")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, j.GPUs)

	j, err = JobFromEnviron(map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_GPUS": "0,x", "SLURM_JOB_NAME": "x"}, "1+0")
	require.EqualError(t, err, `SLURM_STEP_GPUS: "0,x" is not a list of GPU indexes`)
	assert.Equal(t, "x", j.Name, "the other fields are read")
}

func FuzzParseGPUList(f *testing.F) {
	f.Add("0,1,2,3")
	f.Add("")
	f.Add("7")
	f.Add("0,,1")
	f.Fuzz(func(t *testing.T, s string) {
		gpus, err := ParseGPUList(s)
		if err != nil {
			if gpus != nil {
				t.Fatalf("%q: error %v with %v", s, err, gpus)
			}
			return
		}
		back := make([]string, len(gpus))
		for i, g := range gpus {
			back[i] = strconv.Itoa(g)
		}
		// Every accepted list is Slurm's own printing of it, but for leading zeros ParseUint takes.
		if got := strings.Join(back, ","); len(got) > len(s) || strings.Count(s, ",") != strings.Count(got, ",") {
			t.Fatalf("%q read as %v", s, gpus)
		}
	})
}

// FuzzJobFromEnviron reads a /proc/<pid>/environ's bytes as StepOf does.
func FuzzJobFromEnviron(f *testing.F) {
	f.Add([]byte("SLURM_JOB_ID=42\x00SLURM_JOB_USER=alice\x00SLURM_STEP_GPUS=0,1\x00"), "0")
	f.Add([]byte("SLURM_JOB_ID=42\x00SLURM_JOB_GPUS=3\x00SLURM_JOB_NAME=a=b\x00"), "batch")
	f.Add([]byte("=\x00\x00SLURM_JOB_ID\x00"), "1+0")
	f.Fuzz(func(t *testing.T, environ []byte, step string) {
		env := tasklabels.ParseEnviron(strings.Split(string(environ), "\x00"))
		j, err := JobFromEnviron(env, step)
		if j.ID != env["SLURM_JOB_ID"] || j.User != env["SLURM_JOB_USER"] || j.Name != env["SLURM_JOB_NAME"] {
			t.Fatalf("%q: %+v", environ, j)
		}
		if err != nil && j.GPUs != nil {
			t.Fatalf("%q: error %v with GPUs %v", environ, err, j.GPUs)
		}
		if err == nil && (j.ID == "" || !j.FromEnviron) {
			t.Fatalf("%q: accepted %+v", environ, j)
		}
	})
}

// TestRealSlurmCaptures reads whole /proc/<pid>/cgroup files and the Slurm variables of the
// environments of real steps (testdata/captures/SOURCE.md): Debian's Slurm is built for several
// slurmds (slurm_<node>), an array task's job id is not its array's, and CUDA_VISIBLE_DEVICES is 0
// in every step whatever GPU it holds.
func TestRealSlurmCaptures(t *testing.T) {
	proc := newFakeProc(t)
	for pid, name := range map[int]string{1: "v1-array-task0-batch", 2: "v1-twostep-step1", 3: "v1-srun-step0"} {
		dir := filepath.Join(proc.root, strconv.Itoa(pid))
		require.NoError(t, os.Mkdir(dir, 0o755))
		for _, f := range []string{"cgroup", "environ"} {
			b, err := os.ReadFile(filepath.Join("testdata/captures", name+"."+f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
		}
	}
	steps, err := NewProcSteps(proc.root, CgroupLayout{})
	require.NoError(t, err)
	want := map[int]Process{
		1: {
			Location: Location{CgroupVersion: 1, Node: "n1", UID: "4242", JobID: "4", Step: "batch", Task: "0"},
			Job: Job{
				ID: "4", User: "alice", Account: "physics", Partition: "gpu", Name: "arr",
				ArrayJobID: "1", ArrayTaskID: "0", GPUs: []int{0}, FromEnviron: true,
			},
		},
		2: {
			Location: Location{CgroupVersion: 1, Node: "n1", UID: "4242", JobID: "2", Step: "1", Task: "0"},
			Job:      Job{ID: "2", User: "alice", Account: "physics", Partition: "gpu", Name: "twostep", GPUs: []int{3}, FromEnviron: true},
		},
		3: {
			Location: Location{CgroupVersion: 1, Node: "n1", UID: "4242", JobID: "3", Step: "0", Task: "0"},
			Job:      Job{ID: "3", User: "alice", Account: "bio", Partition: "gpu", Name: "inter", GPUs: []int{4}, FromEnviron: true},
		},
	}
	for pid, w := range want {
		p, ok, err := steps.StepOf(pid)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, w, p, "pid %d", pid)
	}
}

// TestRunning: the walk finds each step of a v2 tree once, its job from a task's environment,
// slurmstepd's own cgroup passed over, a step with no readable process left out.
func TestRunning(t *testing.T) {
	proc := newFakeProc(t)
	mount := t.TempDir()
	scope := filepath.Join(mount, DefaultSlice, "slurmstepd.scope")
	place := func(dir string, pids ...int) {
		require.NoError(t, os.MkdirAll(filepath.Join(scope, dir), 0o755))
		var b strings.Builder
		for _, pid := range pids {
			b.WriteString(strconv.Itoa(pid) + "\n")
		}
		require.NoError(t, os.WriteFile(filepath.Join(scope, dir, "cgroup.procs"), []byte(b.String()), 0o600))
	}
	cgroupOf := func(dir string) string { return "0::/" + DefaultSlice + "/slurmstepd.scope/" + dir + "\n" }
	place("job_42/step_batch/slurm", 100)
	proc.add(100, cgroupOf("job_42/step_batch/slurm"), nil)
	place("job_42/step_batch/user/task_0", 101, 102)
	proc.add(101, cgroupOf("job_42/step_batch/user/task_0"), nil) // environ unreadable
	proc.add(102, cgroupOf("job_42/step_batch/user/task_0"), []string{"SLURM_JOB_ID=42", "SLURM_JOB_GPUS=0,1"})
	place("job_43/step_0/user/task_0", 200) // exited: no /proc entry
	place("job_44/step_0/user/task_0")

	steps, err := NewProcSteps(proc.root, CgroupLayout{})
	require.NoError(t, err)
	running, err := steps.Running(mount)
	require.NoError(t, err)
	require.Len(t, running, 1)
	assert.Equal(t, "/"+DefaultSlice+"/slurmstepd.scope/job_42/step_batch", running[0].Dir)
	assert.Equal(t, "42.batch", running[0].Key())
	assert.Equal(t, []int{0, 1}, running[0].Job.GPUs, "the environment of the process that has one")

	_, err = steps.Running(filepath.Join(mount, "absent"))
	require.Error(t, err, "a hierarchy that is not there")
}
