// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm"

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/procfs"

	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
)

// Process is a process of a Slurm job step: where its cgroup is, and its job.
type Process struct {
	Location
	Job Job
}

// Steps finds the Slurm job step of a process.
type Steps interface {
	// StepOf returns the step process pid runs in; ok is false for a process outside any step.
	// An error means the process could not be read (it exited, or /proc is not the node's).
	StepOf(pid int) (p Process, ok bool, err error)
}

// ProcSteps reads steps from /proc: the cgroup path of each process, and the environment of one
// process per step, kept until Sweep finds the step gone.
type ProcSteps struct {
	proc   procfs.FS
	layout CgroupLayout

	mu   sync.Mutex
	jobs map[string]*cachedJob // by Location.Key
	// malformed counts the steps whose environment had a GPU list that is not Slurm's.
	malformed atomic.Int64
}

type cachedJob struct {
	job  Job
	seen bool // looked up since the last Sweep
}

// NewProcSteps reads the processes under procRoot (the node's /proc) with the node's cgroup
// layout.
func NewProcSteps(procRoot string, layout CgroupLayout) (*ProcSteps, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return &ProcSteps{proc: fs, layout: layout, jobs: map[string]*cachedJob{}}, nil
}

var _ Steps = (*ProcSteps)(nil)

// StepOf reads /proc/<pid>/cgroup and, the first time it meets the step, /proc/<pid>/environ.
// When the environment cannot be read (another user's process without CAP_SYS_PTRACE, or a
// process that changed its own), the job is known by its cgroup path only and is read again from
// the step's next process.
func (s *ProcSteps) StepOf(pid int) (Process, bool, error) {
	p, err := s.proc.Proc(pid)
	if err != nil {
		return Process{}, false, err
	}
	cgroups, err := p.Cgroups()
	if err != nil {
		return Process{}, false, err
	}
	loc, ok := s.locate(cgroups)
	if !ok {
		return Process{}, false, nil
	}
	key := loc.Key()
	s.mu.Lock()
	cached := s.jobs[key]
	if cached != nil {
		cached.seen = true
		job := cached.job
		s.mu.Unlock()
		return Process{Location: loc, Job: job}, true, nil
	}
	s.mu.Unlock()

	job := Job{ID: loc.JobID}
	if environ, err := p.Environ(); err == nil {
		fromEnv, envErr := JobFromEnviron(tasklabels.ParseEnviron(environ), loc.Step)
		// A job id that is not the path's is another job's environment (a process started
		// elsewhere and moved into this step): the path's id stands. A malformed GPU list costs
		// the step its GPUs from the environment, not its other fields.
		if fromEnv.ID != "" && (loc.JobID == "" || fromEnv.ID == loc.JobID) {
			if envErr != nil {
				s.malformed.Add(1)
			}
			job = fromEnv
			s.mu.Lock()
			s.jobs[key] = &cachedJob{job: job, seen: true}
			s.mu.Unlock()
		}
	}
	return Process{Location: loc, Job: job}, true, nil
}

// locate finds the step in a process's cgroup lines. Under v1 every controller Slurm manages
// names the same step, some (memory, cpuacct) down to the task: the line with the task wins.
func (s *ProcSteps) locate(cgroups []procfs.Cgroup) (Location, bool) {
	var found Location
	var ok bool
	for _, cg := range cgroups {
		if loc, isStep := s.layout.ParsePath(cg.Path); isStep && (!ok || found.Task == "") {
			found, ok = loc, true
		}
	}
	return found, ok
}

// Sweep forgets the steps not looked up since the last Sweep: call it once a collection, after
// the collection's lookups, so that a step's environment is read once while it runs.
func (s *ProcSteps) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, c := range s.jobs {
		if !c.seen {
			delete(s.jobs, key)
			continue
		}
		c.seen = false
	}
}

// MalformedGPULists is the number of steps whose SLURM_STEP_GPUS or SLURM_JOB_GPUS was not a
// list of GPU indexes (their GPUs are then only those their processes are on).
func (s *ProcSteps) MalformedGPULists() int64 { return s.malformed.Load() }

// Cached is the number of steps whose environment is kept.
func (s *ProcSteps) Cached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}
