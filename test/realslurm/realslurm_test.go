// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realslurm

// The real-Slurm tests (build tag realslurm, root): internal/slurm reading the processes of real
// sbatch and srun jobs on a real slurmd (Debian 12's 22.05, cgroup v1), and gpu_attribution's
// slurm source putting them on the page (page_test.go).
//
//	sudo go test -tags realslurm ./test/realslurm/
package realslurm_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/test/realslurm"
)

// within bounds a wait on Slurm (a job scheduled, a step started or gone): it fails a hung
// cluster with a message, and is never a measure of speed.
const within = 2 * time.Minute

// step is what the test expects of one step: its job's fields as Slurm sets them.
type step struct {
	job, step, name, account, arrayJob, arrayTask string
	gpus                                          int // how many GPUs it holds
}

func TestJobs(t *testing.T) {
	begin := time.Now()
	if os.Geteuid() != 0 {
		t.Fatal("the real-Slurm tests run as root: they start slurmd, make device files and cgroups")
	}
	cluster, startErr := realslurm.Start()
	require.NoError(t, startErr)
	t.Cleanup(func() {
		require.NoError(t, cluster.Stop())
		t.Logf("wall time, cluster start to teardown: %s", time.Since(begin).Round(time.Millisecond))
	})
	t.Logf("cluster up after %s", time.Since(begin).Round(time.Millisecond))

	// A job that ends when the test says: its batch script waits on a FIFO.
	fifo := filepath.Join(cluster.Dir, "work", "end")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Chown(fifo, realslurm.UID, realslurm.UID))

	sbatch := func(args ...string) string {
		t.Helper()
		out, err := cluster.AsUser("sbatch", append([]string{"--parsable", "--output=/dev/null"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	array := sbatch("--array=0-1", "--gres=gpu:1", "--job-name=sweep", "--account=physics", "--wrap=exec sleep 600")
	twoStep := sbatch("--ntasks=2", "--gres=gpu:2", "--job-name=train", "--account=physics", "--wrap="+
		"srun --ntasks=1 --exact --gres=gpu:1 sleep 600 & srun --ntasks=1 --exact --gres=gpu:1 sleep 600 & wait")
	// It first tries every GPU's device file: ConstrainDevices denies (EPERM) those not the
	// job's, and the others open as far as a device without a driver does (ENXIO).
	opened := filepath.Join(cluster.Dir, "work", "opened")
	ends := sbatch("--gres=gpu:1", "--job-name=ends", "--account=bio", "--wrap="+
		"for d in "+filepath.Join(cluster.Dir, "dev")+"/nvidia*; do "+
		"(exec 3<\"$d\") 2>&1 | grep -q 'not permitted' || echo \"${d##*nvidia}\"; done > "+opened+"; read line < "+fifo)
	cancelled := sbatch("--gres=gpu:1", "--job-name=cancelled", "--account=bio", "--wrap=exec sleep 600")
	// An interactive srun: a job of one step, 0, whose client waits here until the job ends.
	interactive := cluster.AsUser("srun", "--gres=gpu:1", "--job-name=inter", "--account=bio", "sleep", "600")
	require.NoError(t, interactive.Start())
	t.Cleanup(func() {
		_ = interactive.Process.Kill()
		_ = interactive.Wait()
	})

	// The array's tasks: "<array>_<task>" is each task's job, whose id squeue gives.
	taskJob := map[string]string{}
	poll.UntilNoError(t, within, "every job running", func() error {
		out, squeueErr := cluster.Command("squeue", "--noheader", "--format=%i %A %T %j").Output()
		if squeueErr != nil {
			return squeueErr
		}
		running := 0
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) != 4 {
				continue
			}
			if f[2] == "RUNNING" {
				running++
			}
			taskJob[f[0]] = f[1]
		}
		if running != 6 {
			return fmt.Errorf("%d of 6 jobs running:\n%s", running, out)
		}
		return nil
	})
	interJob := ""
	for name, id := range taskJob {
		if !strings.Contains(name, "_") && id != array && id != twoStep && id != ends && id != cancelled {
			interJob = id
		}
	}
	require.NotEmpty(t, interJob, "the interactive srun's job in %v", taskJob)

	want := map[string]step{
		taskJob[array+"_0"] + ".batch": {job: taskJob[array+"_0"], step: "batch", name: "sweep", account: "physics", arrayJob: array, arrayTask: "0", gpus: 1},
		taskJob[array+"_1"] + ".batch": {job: taskJob[array+"_1"], step: "batch", name: "sweep", account: "physics", arrayJob: array, arrayTask: "1", gpus: 1},
		twoStep + ".batch":             {job: twoStep, step: "batch", name: "train", account: "physics", gpus: 2},
		twoStep + ".0":                 {job: twoStep, step: "0", name: "train", account: "physics", gpus: 1},
		twoStep + ".1":                 {job: twoStep, step: "1", name: "train", account: "physics", gpus: 1},
		ends + ".batch":                {job: ends, step: "batch", name: "ends", account: "bio", gpus: 1},
		cancelled + ".batch":           {job: cancelled, step: "batch", name: "cancelled", account: "bio", gpus: 1},
		interJob + ".0":                {job: interJob, step: "0", name: "inter", account: "bio", gpus: 1},
	}

	steps, err := slurm.NewProcSteps("/proc", slurm.CgroupLayout{})
	require.NoError(t, err)
	var found map[string]slurm.Process
	var pids map[string]int
	poll.UntilNoError(t, within, "every step's processes", func() error {
		found, pids = scanPIDs(t, steps)
		if missing := missingKeys(want, found); len(missing) > 0 {
			return fmt.Errorf("steps %v not found; found %v", missing, keys(found))
		}
		// A task forked by slurmstepd is in its step's freezer cgroup before it is in its task's
		// and has its environment: StepOf gives the path's job id only (and keeps nothing) until then.
		for key, p := range found {
			if p.Task != "0" || !p.Job.FromEnviron {
				return fmt.Errorf("step %s still starting: %+v", key, p)
			}
		}
		return nil
	})
	assert.ElementsMatch(t, keys(want), keys(found), "the steps on the node")

	jobGPUs := map[string][]int{} // each job's GPUs, from its batch step or its only step
	for key, w := range want {
		p := found[key]
		assert.Equal(t, slurm.Location{
			CgroupVersion: 1, Node: realslurm.NodeName, UID: strconv.Itoa(realslurm.UID),
			JobID: w.job, Step: w.step, Task: "0",
		}, p.Location, key)
		gpus := p.Job.GPUs
		p.Job.GPUs = nil
		assert.Equal(t, slurm.Job{
			ID: w.job, User: realslurm.User, Account: w.account, Partition: realslurm.Partition,
			Name: w.name, ArrayJobID: w.arrayJob, ArrayTaskID: w.arrayTask, FromEnviron: true,
		}, p.Job, key)
		assert.Len(t, gpus, w.gpus, key)
		if w.step == "batch" || w.job == interJob {
			jobGPUs[w.job] = gpus
		}
	}
	// The GPU indexes of a step's environment are the minors of the devices it may open (gres.conf
	// lists nvidia0…7 in order).
	poll.UntilNoError(t, within, "the ends job's device files tried", func() error {
		b, readErr := os.ReadFile(opened)
		if readErr != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return fmt.Errorf("%s: %q: %w", opened, b, readErr)
		}
		var minors []int
		for f := range strings.FieldsSeq(string(b)) {
			m, atoiErr := strconv.Atoi(f)
			if atoiErr != nil {
				return poll.Permanent(fmt.Errorf("%s: %q", opened, b))
			}
			minors = append(minors, m)
		}
		if !slices.Equal(minors, found[ends+".batch"].Job.GPUs) {
			return poll.Permanent(fmt.Errorf("the job could open GPUs %v; its environment says %v", minors, found[ends+".batch"].Job.GPUs))
		}
		return nil
	})

	// No GPU is two jobs'; a step's GPUs are its job's.
	seen := map[int]string{}
	for job, gpus := range jobGPUs {
		for _, g := range gpus {
			assert.Empty(t, seen[g], "GPU %d is job %s's and %s's", g, job, seen[g])
			seen[g] = job
		}
	}
	assert.Subset(t, jobGPUs[twoStep], found[twoStep+".0"].Job.GPUs)
	assert.Subset(t, jobGPUs[twoStep], found[twoStep+".1"].Job.GPUs)
	assert.NotEqual(t, found[twoStep+".0"].Job.GPUs, found[twoStep+".1"].Job.GPUs)

	// The agent's page: each job, step and array task on its GPUs with its share. Each step's
	// first task process is on its first GPU, but the two-step job's batch step, whose script
	// only waits: it holds its two GPUs with no process, each shared with one of its steps.
	agent := startAgentPage(t, filepath.Join(cluster.Dir, "work"))
	tasks := startTaskReceiver(t)
	idle := map[string]bool{twoStep + ".batch": true}
	gpus := map[string][]int{}
	gpuProcesses := func() []gpuProcess {
		var procs []gpuProcess
		for key := range want {
			gpus[key] = found[key].Job.GPUs
			if !idle[key] {
				procs = append(procs, gpuProcess{pid: pids[key], gpu: gpus[key][0]})
			}
		}
		return procs
	}
	agent.setProcesses(gpuProcesses())
	wantShare, wantJobs := wantPage(want, gpus, idle)
	poll.UntilNoError(t, within, "every step on the page", func() error {
		got, collectErr := agent.collect()
		if collectErr != nil {
			return collectErr
		}
		return diffPage(got, wantShare, wantJobs)
	})

	// The task receiver: each step a task, with the same labels.
	wantTasks := func() map[string]string {
		w := map[string]string{}
		for key, s := range want {
			w[key] = realslurm.User + " " + s.name
		}
		return w
	}
	poll.UntilNoError(t, within, "every step a task", func() error {
		if got := stepTasks(tasks); !maps.Equal(got, wantTasks()) {
			return fmt.Errorf("task_mem_usage_byte's steps %v, want %v", got, wantTasks())
		}
		return nil
	})

	// The job that ends, and the one cancelled, go with their processes.
	require.NoError(t, os.WriteFile(fifo, []byte("end\n"), 0o600))
	out, err := cluster.AsUser("scancel", cancelled).CombinedOutput()
	require.NoError(t, err, "%s", out)
	delete(want, ends+".batch")
	delete(want, cancelled+".batch")
	poll.UntilNoError(t, within, "the ended and cancelled jobs' steps gone", func() error {
		steps.Sweep()
		found = scan(t, steps)
		if !slices.Equal(sortedKeys(want), sortedKeys(found)) {
			return fmt.Errorf("steps %v, want %v", sortedKeys(found), sortedKeys(want))
		}
		return nil
	})
	// ... and from the page: their series end (a NoRecordedValue point), their slurm_job_info too.
	agent.setProcesses(gpuProcesses())
	wantShare, wantJobs = wantPage(want, gpus, idle)
	endedSeries := map[string]bool{}
	poll.UntilNoError(t, within, "the ended and cancelled jobs off the page", func() error {
		got, collectErr := agent.collect()
		if collectErr != nil {
			return collectErr
		}
		for key := range got.ended {
			endedSeries[key] = true
		}
		return diffPage(got, wantShare, wantJobs)
	})
	for _, job := range []string{ends, cancelled} {
		gpu := strconv.Itoa(gpus[job+".batch"][0])
		assert.True(t, endedSeries[job+".batch|"+gpu], "job %s's series ended, not left to expire: %v", job, endedSeries)
	}

	poll.UntilNoError(t, within, "the ended and cancelled jobs' tasks gone", func() error {
		if got := stepTasks(tasks); !maps.Equal(got, wantTasks()) {
			return fmt.Errorf("task_mem_usage_byte's steps %v, want %v", got, wantTasks())
		}
		return nil
	})

	// The gone steps' environments are forgotten after a sweep with no lookup of them.
	steps.Sweep()
	assert.Equal(t, len(want), steps.Cached())
}

// scan finds every process of the cluster's steps in /proc: for each step, the process of its
// first task (the task's first process, as a lookup of a GPU's process would find it).
func scan(t *testing.T, steps *slurm.ProcSteps) map[string]slurm.Process {
	t.Helper()
	found, _ := scanPIDs(t, steps)
	return found
}

// scanPIDs is scan with each step's process's pid.
func scanPIDs(t *testing.T, steps *slurm.ProcSteps) (map[string]slurm.Process, map[string]int) {
	t.Helper()
	pids := map[string]int{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	found := map[string]slurm.Process{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok, err := steps.StepOf(pid)
		if err != nil || !ok || p.Node != realslurm.NodeName || !p.IsTask() {
			continue // exited since ReadDir, outside Slurm, or another cluster's
		}
		if _, dup := found[p.Key()]; !dup || p.Task == "0" {
			found[p.Key()] = p
			pids[p.Key()] = pid
		}
	}
	return found, pids
}

func missingKeys[V any](want map[string]step, found map[string]V) []string {
	var missing []string
	for k := range want {
		if _, ok := found[k]; !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func sortedKeys[V any](m map[string]V) []string {
	ks := keys(m)
	slices.Sort(ks)
	return ks
}
