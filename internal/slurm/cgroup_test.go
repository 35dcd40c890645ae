// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A SLUID as print_sluid prints one (26.05's cgroup.conf man page gives this one as its example).
const sluid = "sEKNKTV3WPV500"

func TestParsePath(t *testing.T) {
	v1 := func(node, uid, job, step, task string) Location {
		return Location{CgroupVersion: 1, Node: node, UID: uid, JobID: job, Step: step, Task: task}
	}
	v2 := func(node, job, id, step, task string) Location {
		return Location{CgroupVersion: 2, Node: node, JobID: job, SLUID: id, Step: step, Task: task}
	}
	for _, tt := range []struct {
		layout CgroupLayout
		path   string
		want   Location
		ok     bool
	}{
		// cgroup/v1 (xcgroup.c): every controller's path, with task_<n> where task/cgroup makes it.
		{path: "/slurm/uid_1000/job_42/step_batch", want: v1("", "1000", "42", "batch", ""), ok: true},
		{path: "/slurm/uid_1000/job_42/step_batch/task_0", want: v1("", "1000", "42", "batch", "0"), ok: true},
		{path: "/slurm/uid_0/job_7/step_extern/task_0", want: v1("", "0", "7", "extern", "0"), ok: true},
		{path: "/slurm/uid_1000/job_42/step_3/task_12", want: v1("", "1000", "42", "3", "12"), ok: true},
		{path: "/slurm/uid_1000/job_42/step_0+1/task_0", want: v1("", "1000", "42", "0+1", "0"), ok: true},
		{path: "/slurm_node7/uid_1000/job_42/step_interactive", want: v1("node7", "1000", "42", "interactive", ""), ok: true},
		// A slurmd in a container whose cgroup the agent sees from the host.
		{path: "/docker/abc/slurm/uid_5/job_9/step_0", want: v1("", "5", "9", "0", ""), ok: true},
		// cgroup/v2 (cgroup_v2.c), the default slice, before 26.05 and with CgroupJobIdPaths=yes.
		{path: "/system.slice/slurmstepd.scope/job_42/step_0/user/task_1", want: v2("", "42", "", "0", "1"), ok: true},
		{path: "/system.slice/slurmstepd.scope/job_42/step_batch/user/task_special", want: v2("", "42", "", "batch", "special"), ok: true},
		{path: "/system.slice/slurmstepd.scope/job_42/step_extern/slurm", want: v2("", "42", "", "extern", "slurm"), ok: true},
		{path: "/system.slice/n1_slurmstepd.scope/job_42/step_2+0/user/task_0", want: v2("n1", "42", "", "2+0", "0"), ok: true},
		// 25.11's CgroupSlice, and a slurmd started below the root (its init cgroup).
		{layout: CgroupLayout{Slice: "slurm.slice"}, path: "/slurm.slice/slurmstepd.scope/job_5/step_0/user/task_0", want: v2("", "5", "", "0", "0"), ok: true},
		{layout: CgroupLayout{Slice: "slurm.slice"}, path: "/kubepods.slice/pod/cri-containerd-1.scope/slurm.slice/slurmstepd.scope/job_5/step_0/user/task_0", want: v2("", "5", "", "0", "0"), ok: true},
		{layout: CgroupLayout{Slice: "slurm.slice"}, path: "/system.slice/slurmstepd.scope/job_5/step_0/user/task_0"},
		// 26.05: the job directory named by its SLUID.
		{path: "/system.slice/slurmstepd.scope/" + sluid + "/step_batch/user/task_0", want: v2("", "", sluid, "batch", "0"), ok: true},
		// Not a step's process.
		{path: "/system.slice/slurmd.service"},
		{path: "/system.slice/slurmstepd.scope/system"},
		{path: "/system.slice/slurmstepd.scope/job_42"},
		{path: "/system.slice/slurmstepd.scope/job_42/step_0/user"},
		{path: "/slurm/system"},
		{path: "/slurm/uid_1000/job_42"},
		{path: "/"},
		{path: ""},
		// Near misses: what Slurm never prints.
		{path: "/slurm/uid_1000/job_042/step_0"},
		{path: "/slurm/uid_1000/job_42/step_TDB"},
		{path: "/slurm/uid_1000/job_42/step_0+"},
		{path: "/slurm/uid_1000/job_4294967296/step_0"},
		{path: "/slurm_/uid_1000/job_42/step_0"},
		{path: "/slurmx/uid_1000/job_42/step_0"},
		{path: "/slurm/uid_1000/job_42/step_0/task_special"},
		{path: "/system.slice/_slurmstepd.scope/job_42/step_0/user/task_0"},
		{path: "/system.slice/slurmstepd.scope/sEKNKTV3WPV5OO/step_0/user/task_0"},
		{path: "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0/extra"},
	} {
		got, ok := tt.layout.ParsePath(tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
}

// TestCaptures reads cgroup lines that people pasted from real Slurm nodes
// (testdata/captures/SOURCE.md names each).
func TestCaptures(t *testing.T) {
	for _, tt := range []struct {
		file string
		want Location
		ok   bool
	}{
		{"sonar-fox-v2.cgroup", Location{CgroupVersion: 2, JobID: "1392969", Step: "0", Task: "0"}, true},
		{"sonar-v1.cgroup", Location{CgroupVersion: 1, UID: "2101171", JobID: "280678", Step: "interactive", Task: "0"}, true},
		{"rstudio-13690.path", Location{CgroupVersion: 1, UID: "2687", JobID: "13759490", Step: "batch", Task: "0"}, true},
		{"enroot-169.path", Location{CgroupVersion: 2, Node: "slurm-worker-1", JobID: "4749", Step: "0", Task: "0"}, true},
		{"galaxy-4862.cgroup", Location{}, false},
	} {
		b, err := os.ReadFile(filepath.Join("testdata/captures", tt.file))
		require.NoError(t, err)
		line := strings.TrimSpace(string(b))
		if strings.HasSuffix(tt.file, ".cgroup") { // hierarchy:controllers:path
			line = strings.SplitN(line, ":", 3)[2]
		}
		got, ok := CgroupLayout{}.ParsePath(line)
		assert.Equal(t, tt.ok, ok, tt.file)
		assert.Equal(t, tt.want, got, tt.file)
	}
}

func TestIsSLUID(t *testing.T) {
	assert.True(t, IsSLUID(sluid))
	assert.True(t, IsSLUID("s0000000000000"))
	assert.True(t, IsSLUID("sFZZZZZZZZZZZZ")) // the top digit holds 4 bits
	assert.False(t, IsSLUID("sGZZZZZZZZZZZZ"))
	assert.False(t, IsSLUID("SEKNKTV3WPV500"))
	assert.False(t, IsSLUID("sEKNKTV3WPV50"))
	assert.False(t, IsSLUID("sEKNKTV3WPVI00")) // Crockford has no I, L, O or U
	assert.False(t, IsSLUID("sekNKTV3WPV500"))
}

func FuzzParsePath(f *testing.F) {
	f.Add("/slurm/uid_1000/job_42/step_batch/task_0", "")
	f.Add("/slurm_n1/uid_1000/job_42/step_0+1", "")
	f.Add("/system.slice/slurmstepd.scope/job_42/step_0/user/task_special", "")
	f.Add("/a.slice/n_slurmstepd.scope/"+sluid+"/step_extern/slurm", "a.slice")
	f.Fuzz(func(t *testing.T, path, slice string) {
		l, ok := CgroupLayout{Slice: slice}.ParsePath(path)
		if !ok {
			if l != (Location{}) {
				t.Fatalf("rejected %q returned %+v", path, l)
			}
			return
		}
		if !IsStep(l.Step) || !strings.Contains(path, "/step_"+l.Step) {
			t.Fatalf("%q: step %q", path, l.Step)
		}
		if (l.JobID == "") == (l.SLUID == "") {
			t.Fatalf("%q: job %q, SLUID %q: exactly one names the job", path, l.JobID, l.SLUID)
		}
		if l.JobID != "" && !strings.Contains(path, "/job_"+l.JobID+"/") {
			t.Fatalf("%q: job %q is not in the path", path, l.JobID)
		}
		if l.SLUID != "" && (!IsSLUID(l.SLUID) || l.CgroupVersion != 2) {
			t.Fatalf("%q: SLUID %q", path, l.SLUID)
		}
		if (l.UID != "") != (l.CgroupVersion == 1) {
			t.Fatalf("%q: uid %q under cgroup v%d", path, l.UID, l.CgroupVersion)
		}
		if l.Key() == "" || !strings.HasSuffix(l.Key(), "."+l.Step) {
			t.Fatalf("%q: key %q", path, l.Key())
		}
	})
}
