// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package demonode // import "github.com/otelcol-gpu/otelcol-gpu/internal/demonode"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
)

// SlurmJobs is the content of a Slurm jobs file (distro/scenarios/slurm/*.yaml): the jobs of a
// Slurm node, laid out as Slurm 22.05's cgroup/v1 plugin and slurmstepd lay them out.
type SlurmJobs struct {
	Cluster string     `yaml:"cluster"` // SLURM_CLUSTER_NAME
	Node    string     `yaml:"node"`    // the node's name in Slurm: SLURM_JOB_NODELIST
	Jobs    []SlurmJob `yaml:"jobs"`
	// HostProcesses run outside any job (GPU processes there are external).
	HostProcesses []HostProcess `yaml:"host_processes"`
}

// SlurmJob is one job with steps on the node.
type SlurmJob struct {
	ID        int         `yaml:"id"`
	User      string      `yaml:"user"`
	UID       int         `yaml:"uid"`
	Account   string      `yaml:"account"`
	Partition string      `yaml:"partition"`
	Name      string      `yaml:"name"`
	Array     *SlurmArray `yaml:"array"`
	// GPUs are the job's allocation (SLURM_JOB_GPUS), node GPU indexes; empty for a job srun
	// made on its own, whose only GPUs are its step's.
	GPUs  []int       `yaml:"gpus"`
	Steps []SlurmStep `yaml:"steps"`
}

// SlurmArray places a job in a job array.
type SlurmArray struct {
	JobID  int `yaml:"job_id"`  // SLURM_ARRAY_JOB_ID
	TaskID int `yaml:"task_id"` // SLURM_ARRAY_TASK_ID
}

// SlurmStep is one step of a job: its tasks' processes, task i's pid at PIDs[i].
type SlurmStep struct {
	Step string `yaml:"step"`
	// GPUs are what srun gave a numbered step (SLURM_STEP_GPUS); the batch, interactive and
	// extern steps run with the job's.
	GPUs []int `yaml:"gpus"`
	PIDs []int `yaml:"pids"`
	// Comm is the processes' name (python3 unless set).
	Comm string `yaml:"comm"`
}

// LoadSlurmJobs reads a Slurm jobs file strictly; every error names its key.
func LoadSlurmJobs(path string) (*SlurmJobs, error) {
	var j SlurmJobs
	if err := decodeStrict(path, &j); err != nil {
		return nil, err
	}
	if err := j.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &j, nil
}

func (j *SlurmJobs) validate() error {
	var errs []error
	if j.Node == "" {
		errs = append(errs, errors.New("node: the node's Slurm name is required"))
	}
	ids := map[int]bool{}
	pids := map[int]string{}
	claim := func(pid int, key string) {
		if other, taken := pids[pid]; taken {
			errs = append(errs, fmt.Errorf("%s: pid %d is already %s's", key, pid, other))
		}
		pids[pid] = key
	}
	for _, h := range j.HostProcesses {
		claim(h.PID, "host_processes")
	}
	for i := range j.Jobs {
		job := &j.Jobs[i]
		key := fmt.Sprintf("jobs[%d]", i)
		switch {
		case job.ID <= 0:
			errs = append(errs, fmt.Errorf("%s.id: a job id is a positive number, got %d", key, job.ID))
		case ids[job.ID]:
			errs = append(errs, fmt.Errorf("%s.id: job %d is listed twice", key, job.ID))
		}
		ids[job.ID] = true
		if job.User == "" || job.UID <= 0 {
			errs = append(errs, fmt.Errorf("%s: user and uid (a positive number) are required", key))
		}
		if job.Array != nil && job.Array.JobID <= 0 {
			errs = append(errs, fmt.Errorf("%s.array.job_id: the array's job id is a positive number, got %d", key, job.Array.JobID))
		}
		if len(job.Steps) == 0 {
			errs = append(errs, fmt.Errorf("%s.steps: a job on the node has at least one step", key))
		}
		for s, step := range job.Steps {
			stepKey := fmt.Sprintf("%s.steps[%d]", key, s)
			numbered := slurmStepNumbered(step.Step)
			switch {
			case !slurm.IsStep(step.Step):
				errs = append(errs, fmt.Errorf("%s.step: %q is no step Slurm names: want batch, extern, interactive, <n> or <n>+<component>", stepKey, step.Step))
			case !numbered && len(step.GPUs) > 0:
				errs = append(errs, fmt.Errorf("%s.gpus: the %s step runs with the job's GPUs: set the job's gpus instead", stepKey, step.Step))
			}
			if len(step.PIDs) == 0 {
				errs = append(errs, fmt.Errorf("%s.pids: a step runs at least one task", stepKey))
			}
			for _, pid := range step.PIDs {
				claim(pid, stepKey)
			}
		}
	}
	return errors.Join(errs...)
}

// slurmStepNumbered tells a step srun started (<n> or <n>+<component>) from the batch,
// interactive and extern steps.
func slurmStepNumbered(step string) bool {
	n, _, _ := strings.Cut(step, "+")
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}

// slurmCgroupPrefix is the v1 hierarchy's Slurm directory of a slurmd built without
// --enable-multiple-slurmd (with it, slurm_<node>).
const slurmCgroupPrefix = "/slurm"

// StepPath is the step's directory in each v1 controller Slurm manages:
// /slurm/uid_<uid>/job_<id>/step_<step>.
func (j *SlurmJob) StepPath(step SlurmStep) string {
	return fmt.Sprintf("%s/uid_%d/job_%d/step_%s", slurmCgroupPrefix, j.UID, j.ID, step.Step)
}

// StartSlurm writes a Slurm node under root (which must not exist or be empty): each step's
// tasks in their cgroups (memory and cpu,cpuacct per task, as task/cgroup and jobacct_gather/cgroup
// make them; devices per task; freezer per step, proctrack/cgroup's), their processes with the
// environment slurmstepd gives them, the host processes, and the NVIDIA driver's files of gpus.
// A GPU index a job names must be one of gpus.
func StartSlurm(root string, jobs *SlurmJobs, gpus map[int]GPU) error {
	host := hostfixture.Host{CgroupVersion: 1}
	for i := range len(gpus) {
		busID := gpus[i].NvidiaBusID
		if busID == "" {
			busID = fmt.Sprintf("0000:%02x:00.0", i+1)
		}
		host.NvidiaGPUs = append(host.NvidiaGPUs, hostfixture.NvidiaGPU{BusID: busID, Minor: i, UUID: gpus[i].UUID})
	}
	for _, p := range jobs.HostProcesses {
		host.Processes = append(host.Processes, hostfixture.Process{PID: p.PID, Comm: p.Comm, Cmdline: []string{p.Comm}, State: "S", RSSPages: 1000})
	}
	for i := range jobs.Jobs {
		job := &jobs.Jobs[i]
		for _, g := range job.GPUs {
			if _, ok := gpus[g]; !ok {
				return fmt.Errorf("jobs[%d].gpus: no GPU %d on the node (it has %d)", i, g, len(gpus))
			}
		}
		for s, step := range job.Steps {
			for _, g := range step.GPUs {
				if _, ok := gpus[g]; !ok {
					return fmt.Errorf("jobs[%d].steps[%d].gpus: no GPU %d on the node (it has %d)", i, s, g, len(gpus))
				}
			}
			comm := step.Comm
			if comm == "" {
				comm = "python3"
			}
			const cpuUsec, memUsage, memLimit, inactiveFile = 3_600_000_000, 8 << 30, 32 << 30, 1 << 30
			for task, pid := range step.PIDs {
				host.Containers = append(host.Containers, hostfixture.Container{
					CgroupPath: fmt.Sprintf("%s/task_%d", job.StepPath(step), task),
					Processes: []hostfixture.Process{{
						PID: pid, Comm: comm, Cmdline: []string{comm}, Env: jobs.environ(job, step, task, pid),
						State: "S", RSSPages: 250_000,
					}},
					CPUUsec: cpuUsec, MemUsage: memUsage, MemLimit: memLimit, InactiveFile: inactiveFile,
				})
			}
			// The step's own directory, whose counters hold its tasks' (what the task receiver
			// reads of a step), as jobacct_gather/cgroup makes it.
			n := uint64(len(step.PIDs))
			host.Containers = append(host.Containers, hostfixture.Container{
				CgroupPath: job.StepPath(step),
				CPUUsec:    n * cpuUsec, MemUsage: n * memUsage, MemLimit: memLimit, InactiveFile: n * inactiveFile,
			})
		}
	}
	if err := hostfixture.Write(root, host); err != nil {
		return err
	}
	return writeSlurmCgroups(root, jobs)
}

// writeSlurmCgroups adds what hostfixture does not lay out: the freezer's step directories and
// the devices controller's task directories, and each task's /proc/<pid>/cgroup naming them, as
// the kernel writes it on a node without systemd (the lines of internal/slurm's captures).
func writeSlurmCgroups(root string, jobs *SlurmJobs) error {
	write := func(rel, content string) error {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(content), 0o644) //nolint:gosec // G306: /proc and cgroup files are world-readable
	}
	for i := range jobs.Jobs {
		job := &jobs.Jobs[i]
		for _, step := range job.Steps {
			dir := job.StepPath(step)
			var procs strings.Builder
			for _, pid := range step.PIDs {
				fmt.Fprintf(&procs, "%d\n", pid)
			}
			if err := write(filepath.Join("sys/fs/cgroup/freezer", dir, "cgroup.procs"), procs.String()); err != nil {
				return err
			}
			for task, pid := range step.PIDs {
				taskDir := fmt.Sprintf("%s/task_%d", dir, task)
				if err := write(filepath.Join("sys/fs/cgroup/devices", taskDir, "cgroup.procs"), fmt.Sprintf("%d\n", pid)); err != nil {
					return err
				}
				lines := fmt.Sprintf("12:memory:%[2]s\n11:cpu,cpuacct:%[2]s\n10:blkio:%[2]s\n9:pids:%[2]s\n6:freezer:%[1]s\n5:devices:%[2]s\n1:name=systemd:/\n", dir, taskDir)
				if err := write(filepath.Join("proc", strconv.Itoa(pid), "cgroup"), lines); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// environ is what slurmstepd sets for task of step (src/common/env.c's setup_env, the gres
// plugin's GPU variables), plus a shell's PATH. CUDA_VISIBLE_DEVICES counts from 0, as
// ConstrainDevices makes it: the node's indexes are in SLURM_STEP_GPUS and SLURM_JOB_GPUS.
func (j *SlurmJobs) environ(job *SlurmJob, step SlurmStep, task, pid int) []string {
	env := map[string]string{
		"PATH":                "/usr/local/bin:/usr/bin:/bin",
		"SLURM_CLUSTER_NAME":  j.Cluster,
		"SLURM_JOB_ID":        strconv.Itoa(job.ID),
		"SLURM_JOBID":         strconv.Itoa(job.ID),
		"SLURM_JOB_USER":      job.User,
		"SLURM_JOB_UID":       strconv.Itoa(job.UID),
		"SLURM_JOB_GID":       strconv.Itoa(job.UID),
		"SLURM_JOB_ACCOUNT":   job.Account,
		"SLURM_JOB_PARTITION": job.Partition,
		"SLURM_JOB_NAME":      job.Name,
		"SLURM_JOB_NODELIST":  j.Node,
		"SLURM_NODELIST":      j.Node,
		"SLURM_JOB_NUM_NODES": "1",
		"SLURM_NODEID":        "0",
		"SLURM_PROCID":        strconv.Itoa(task),
		"SLURM_LOCALID":       strconv.Itoa(task),
		"SLURM_TASK_PID":      strconv.Itoa(pid),
	}
	if job.Array != nil {
		env["SLURM_ARRAY_JOB_ID"] = strconv.Itoa(job.Array.JobID)
		env["SLURM_ARRAY_TASK_ID"] = strconv.Itoa(job.Array.TaskID)
	}
	visible := job.GPUs
	if len(job.GPUs) > 0 {
		env["SLURM_JOB_GPUS"] = gpuList(job.GPUs)
	}
	if slurmStepNumbered(step.Step) {
		n, _, _ := strings.Cut(step.Step, "+")
		env["SLURM_STEP_ID"], env["SLURM_STEPID"] = n, n
		env["SLURM_STEP_NUM_TASKS"] = strconv.Itoa(len(step.PIDs))
		visible = step.GPUs
		if len(step.GPUs) > 0 {
			env["SLURM_STEP_GPUS"] = gpuList(step.GPUs)
		}
	}
	if len(visible) > 0 {
		renumbered := make([]int, len(visible))
		for i := range renumbered {
			renumbered[i] = i
		}
		env["CUDA_VISIBLE_DEVICES"] = gpuList(renumbered)
		env["GPU_DEVICE_ORDINAL"] = gpuList(renumbered)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func gpuList(gpus []int) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}
