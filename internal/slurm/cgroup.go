// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package slurm finds the Slurm job step a process runs in: the step from the process's cgroup
// path (each layout Slurm's cgroup plugins make, SOURCE.md names the source of each), the job's
// fields and GPUs from the step's environment, and dcgm-exporter's job-mapping files.
package slurm // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm"

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultSlice is the slice of slurmstepd's scope under cgroup v2 when cgroup.conf sets no
// CgroupSlice (the only slice before 25.11).
const DefaultSlice = "system.slice"

// CheckSlice checks a configured CgroupSlice: a slice below the hierarchy's root.
func CheckSlice(slice string) error {
	s := strings.Trim(slice, "/")
	if s == "" || strings.Contains("/"+s+"/", "/../") {
		return fmt.Errorf("must name the slice of slurmstepd's scope (cgroup.conf's CgroupSlice, %s by default), got %q", DefaultSlice, slice)
	}
	return nil
}

// CgroupLayout is what a node's cgroup.conf changes in the paths Slurm makes.
type CgroupLayout struct {
	// Slice is cgroup.conf's CgroupSlice (cgroup v2, Slurm 25.11 and later); empty means
	// DefaultSlice.
	Slice string
}

// Location is where a process sits in Slurm's cgroup tree.
type Location struct {
	// CgroupVersion is 1 (cgroup/v1: <controller>/slurm/uid_<uid>/job_<id>/step_<step>) or 2
	// (cgroup/v2: <slice>/slurmstepd.scope/job_<id>/step_<step>).
	CgroupVersion int
	// Node is the node name where Slurm was built with --enable-multiple-slurmd (Debian's is):
	// slurm_<node> under v1, <node>_slurmstepd.scope under v2; empty otherwise.
	Node string
	// UID is the job owner's numeric user id (v1 only: v2 paths carry none); empty under v2.
	UID string
	// JobID is the numeric job id; empty when the job directory is named by the job's SLUID
	// (cgroup v2 from Slurm 26.05 without CgroupJobIdPaths=yes).
	JobID string
	// SLUID is the job's Slurm lexicographically-sortable unique id when it names the job
	// directory (26.05 and later): "s" and 13 Crockford base32 digits.
	SLUID string
	// Step is the step as Slurm prints it: batch, extern, interactive, <n>, or <n>+<component>
	// for a component of a heterogeneous step.
	Step string
	// Task is the task's cgroup below the step: "0", "1"…, "special" (v2's task_special, where a
	// step's processes wait before they are placed in their task's), "slurm" (v2: slurmstepd
	// itself), or empty (a v1 controller without task directories, or the step's own cgroup).
	Task string
}

// Key names the step uniquely on the node: a job id (or, 26.05 v2, the SLUID) and the step.
func (l Location) Key() string {
	job := l.JobID
	if job == "" {
		job = l.SLUID
	}
	return job + "." + l.Step
}

// IsTask tells whether the process is one of the step's tasks (or waits to be placed in one),
// rather than slurmstepd.
func (l Location) IsTask() bool { return l.Task != "slurm" }

// ParsePath reads a cgroup path (one line's path of /proc/<pid>/cgroup, or a directory below a
// cgroup mount) as Slurm's cgroup plugins make it; ok is false for a path outside any job step
// (slurmd's own "system" cgroup, a job's or user's directory, anything else). Prefixes before
// Slurm's directories are allowed: the cgroup of the container slurmd runs in (Slurm on
// Kubernetes) or of the hierarchy slurmd started in.
func (c CgroupLayout) ParsePath(path string) (l Location, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	slice := c.Slice
	if slice == "" {
		slice = DefaultSlice
	}
	sliceSegs := strings.Split(strings.Trim(slice, "/"), "/")
	for i := range segs {
		if l, ok := parseV1(segs[i:]); ok {
			return l, true
		}
		if hasPrefix(segs[i:], sliceSegs) {
			if l, ok := parseV2(segs[i+len(sliceSegs):]); ok {
				return l, true
			}
		}
	}
	return Location{}, false
}

func hasPrefix(segs, prefix []string) bool {
	if len(segs) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if segs[i] != p {
			return false
		}
	}
	return true
}

// parseV1 reads slurm[_<node>]/uid_<uid>/job_<id>/step_<step>[/task_<n>], as xcgroup.c's
// xcgroup_create_slurm_cg and xcgroup_create_hierarchy make it (the prefix "/slurm", or
// "/slurm_%n" built with --enable-multiple-slurmd, is cgroup.c's cgroup_prepend) and cgroup_v1.c's
// task_<n> for the controllers with per-task directories.
func parseV1(segs []string) (Location, bool) {
	if len(segs) != 4 && len(segs) != 5 {
		return Location{}, false
	}
	node, ok := strings.CutPrefix(segs[0], "slurm")
	if !ok {
		return Location{}, false
	}
	if node != "" {
		if node, ok = strings.CutPrefix(node, "_"); !ok || node == "" {
			return Location{}, false
		}
	}
	l := Location{CgroupVersion: 1, Node: node}
	if l.UID, ok = numberAfter(segs[1], "uid_"); !ok {
		return Location{}, false
	}
	if l.JobID, ok = numberAfter(segs[2], "job_"); !ok {
		return Location{}, false
	}
	if l.Step, ok = stepAfter(segs[3]); !ok {
		return Location{}, false
	}
	if len(segs) == 5 {
		if l.Task, ok = numberAfter(segs[4], "task_"); !ok {
			return Location{}, false
		}
	}
	return l, true
}

// parseV2 reads [<node>_]slurmstepd.scope/<job>/step_<step>/{user[/task_<n>|/task_special],slurm}
// below the slice, as cgroup_v2.c makes it (_set_int_cg_ns names the scope; cgroup_p_step_create
// the job, step, user and slurm directories; the task directories are made as tasks start).
func parseV2(segs []string) (Location, bool) {
	if len(segs) < 4 || len(segs) > 5 {
		return Location{}, false
	}
	scope, ok := strings.CutSuffix(segs[0], "slurmstepd.scope")
	if !ok {
		return Location{}, false
	}
	l := Location{CgroupVersion: 2}
	if scope != "" {
		if l.Node, ok = strings.CutSuffix(scope, "_"); !ok || l.Node == "" {
			return Location{}, false
		}
	}
	if id, isID := numberAfter(segs[1], "job_"); isID {
		l.JobID = id
	} else if IsSLUID(segs[1]) {
		l.SLUID = segs[1]
	} else {
		return Location{}, false
	}
	if l.Step, ok = stepAfter(segs[2]); !ok {
		return Location{}, false
	}
	switch {
	case len(segs) == 4 && segs[3] == "slurm":
		l.Task = "slurm"
	case len(segs) == 5 && segs[3] == "user" && segs[4] == "task_special":
		l.Task = "special"
	case len(segs) == 5 && segs[3] == "user":
		if l.Task, ok = numberAfter(segs[4], "task_"); !ok {
			return Location{}, false
		}
	default:
		// The step's user directory holds no process of its own: only its tasks' directories.
		return Location{}, false
	}
	return l, true
}

func numberAfter(seg, prefix string) (string, bool) {
	n, ok := strings.CutPrefix(seg, prefix)
	return n, ok && isNumber(n)
}

func stepAfter(seg string) (string, bool) {
	step, ok := strings.CutPrefix(seg, "step_")
	return step, ok && IsStep(step)
}

// IsStep tells whether s is a step as Slurm's log_build_step_id_str prints it without its job:
// batch, extern, interactive, <n> or <n>+<heterogeneous component>.
func IsStep(s string) bool {
	switch s {
	case "batch", "extern", "interactive":
		return true
	}
	n, comp, het := strings.Cut(s, "+")
	return isNumber(n) && (!het || isNumber(comp))
}

// isNumber accepts what Slurm prints with %u: decimal digits of a uint32, no sign, no leading zero.
func isNumber(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// crockford is the alphabet of sluid.c's print_sluid: Crockford's base32, upper case.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// IsSLUID tells whether s is a SLUID as print_sluid (src/common/sluid.c, 26.05) prints it: "s"
// and 13 base32 digits, the first of which holds the top 4 bits of 64.
func IsSLUID(s string) bool {
	if len(s) != 14 || s[0] != 's' || strings.IndexByte(crockford[:16], s[1]) < 0 {
		return false
	}
	for i := 2; i < len(s); i++ {
		if strings.IndexByte(crockford, s[i]) < 0 {
			return false
		}
	}
	return true
}
