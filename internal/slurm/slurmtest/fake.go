// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package slurmtest holds a fake of slurm.Steps for the tests of what reads it.
package slurmtest // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm/slurmtest"

import (
	"fmt"
	"sync"

	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
)

// Steps answers StepOf from the processes set on it; a pid not set is a process that exited.
type Steps struct {
	mu    sync.Mutex
	procs map[int]*slurm.Process // nil: a process outside any step
}

var _ slurm.Steps = (*Steps)(nil)

// Set makes pid a process of p's step.
func (s *Steps) Set(pid int, p slurm.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.procs[pid] = &p
}

// SetOutside makes pid a process outside any step.
func (s *Steps) SetOutside(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.procs[pid] = nil
}

// Exit removes pid.
func (s *Steps) Exit(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, pid)
}

func (s *Steps) init() {
	if s.procs == nil {
		s.procs = map[int]*slurm.Process{}
	}
}

// StepOf implements slurm.Steps.
func (s *Steps) StepOf(pid int) (slurm.Process, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, known := s.procs[pid]
	switch {
	case !known:
		return slurm.Process{}, false, fmt.Errorf("process %d: no such process", pid)
	case p == nil:
		return slurm.Process{}, false, nil
	}
	return *p, true, nil
}
