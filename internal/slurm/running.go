// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm"

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// WalkRoot is the hierarchy Running walks under a cgroup mount: v2's root, or v1's freezer
// controller, where proctrack/cgroup keeps every process of a step (memory, cpuacct and devices
// have a step's directories only where cgroup.conf or jobacct_gather/cgroup make them); "" for a
// v1 mount without freezer.
func WalkRoot(mount string, version cgroupfs.Version) string {
	if version != cgroupfs.V1 {
		return mount
	}
	freezer := filepath.Join(mount, "freezer")
	if _, err := os.Stat(freezer); err != nil {
		return ""
	}
	return freezer
}

// RunningStep is a step found in the cgroup tree.
type RunningStep struct {
	Process
	// Dir is the step's cgroup directory (step_<step>), relative to the walked hierarchy, as
	// /proc/<pid>/cgroup names it: it is gone once the step is.
	Dir string
}

// maxDepth bounds the walk: Slurm's deepest directory (a v2 task below a container's cgroup,
// Slurm on Kubernetes) is about a dozen levels down.
const maxDepth = 16

// maxProcsFile bounds a cgroup.procs read: a step's processes, a few bytes each.
const maxProcsFile = 1 << 20

// Running walks a cgroup hierarchy for Slurm's steps (v2's root, or v1's freezer controller,
// where proctrack/cgroup keeps every process of a step) and reads each step's job through
// StepOf, so once per step. A step none of whose processes can be read yet (one that is
// starting) is left out until the next walk; a directory that vanishes during the walk (a step
// that ended) is passed over.
func (s *ProcSteps) Running(mount string) ([]RunningStep, error) {
	found := map[string]int{} // index in steps, by Location.Key
	var steps []RunningStep
	err := filepath.WalkDir(mount, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			if dir != mount && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(dir, mount))
		if strings.Count(rel, "/") > maxDepth {
			return fs.SkipDir
		}
		loc, ok := s.layout.ParsePath(rel)
		if !ok || !loc.IsTask() {
			return nil
		}
		p, ok := s.firstProcess(dir)
		if !ok {
			return nil
		}
		if i, seen := found[p.Key()]; !seen {
			found[p.Key()] = len(steps)
			steps = append(steps, RunningStep{Process: p, Dir: stepDir(rel, p.Step)})
		} else if !steps[i].Job.FromEnviron && p.Job.FromEnviron {
			steps[i].Process = p
		}
		return nil
	})
	return steps, err
}

// firstProcess is the step of the first process of a cgroup that can be read, its environment
// preferred.
func (s *ProcSteps) firstProcess(dir string) (Process, bool) {
	b, err := hostfile.ReadLimited(filepath.Join(dir, "cgroup.procs"), maxProcsFile)
	if err != nil {
		return Process{}, false
	}
	pids, err := cgroupfs.ParsePIDs(b, nil)
	if err != nil {
		return Process{}, false
	}
	var first Process
	var ok bool
	for _, pid := range pids {
		p, inStep, err := s.StepOf(pid)
		if err != nil || !inStep || !p.IsTask() {
			continue
		}
		if p.Job.FromEnviron {
			return p, true
		}
		if !ok {
			first, ok = p, true
		}
	}
	return first, ok
}

// stepDir is the step_<step> directory of a path below it.
func stepDir(rel, step string) string {
	seg := "/step_" + step
	for dir := rel; dir != "/" && dir != "."; dir = path.Dir(dir) {
		if strings.HasSuffix(dir, seg) {
			return dir
		}
	}
	return rel
}
