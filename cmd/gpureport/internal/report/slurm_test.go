// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slurmWeek is an hour of a Kubernetes node and a Slurm node: the Kubernetes job of alice, and
// on the Slurm node alice's two array tasks (one job name, two ids) and bob's job, the accounts
// physics and chemistry from slurm_job_info, and carol's job whose slurm_job_info is missing.
func slurmWeek(t *testing.T) (kube, slurm inputs, info []series, o Options) {
	t.Helper()
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o = Options{
		Start: start, End: start.Add(time.Hour), MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1,
		IdleBelow: 10, IdleHeldUtilBelow: 1, IdleHeldMemoryAtLeast: 1, BusyAtLeast: 80, LowSMBelow: 30,
	}
	constant := func(v float64) []sample {
		var s []sample
		for m := time.Duration(0); m <= 60; m++ {
			s = append(s, sample{start.Add(m * time.Minute).UnixMilli(), v})
		}
		return s
	}
	task := func(instance, node, gpu string, kv ...string) model.Metric {
		l := model.Metric{"instance": model.LabelValue(instance), "node_name": model.LabelValue(node), "minor_number": model.LabelValue(gpu), "uuid": model.LabelValue("GPU-" + node + gpu)}
		for i := 0; i+1 < len(kv); i += 2 {
			l[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return l
	}
	const k8s, sl = "10.0.0.1:9102", "10.0.0.2:9102"
	kube.taskUtil = []series{{task(k8s, "dgx-01", "0", "username", "alice", "job_name", "alice~resnet", "virtual_cluster", "vision"), constant(90)}}
	slurmTask := func(gpu, id, step, user, name string) model.Metric {
		return task(sl, "slurm-01", gpu, "username", user, "job_name", name, "slurm_job_id", id, "slurm_step", step, "virtual_cluster", "unknown")
	}
	slurm.taskUtil = []series{
		{slurmTask("0", "2001", "batch", "alice", "sweep"), constant(80)},
		{slurmTask("1", "2002", "batch", "alice", "sweep"), constant(20)},
		{slurmTask("2", "2010", "0", "bob", "md-sim"), constant(50)},
		{slurmTask("3", "2010", "1", "bob", "md-sim"), constant(70)},
		{slurmTask("4", "2020", "interactive", "carol", "interactive"), constant(0)},
	}
	jobInfo := func(id, user, account string) series {
		return series{model.Metric{"instance": sl, "node_name": "slurm-01", "slurm_job_id": model.LabelValue(id), "username": model.LabelValue(user), "slurm_account": model.LabelValue(account), "slurm_partition": "gpu"}, constant(1)}
	}
	info = []series{jobInfo("2001", "alice", "physics"), jobInfo("2002", "alice", "physics"), jobInfo("2010", "bob", "chemistry")}
	return kube, slurm, info, o
}

func names(rows []Usage) map[string]float64 {
	out := map[string]float64{}
	for i := range rows {
		out[rows[i].Name] = rows[i].HeldHours
	}
	return out
}

// TestSlurmGrouping: a Slurm node's jobs are grouped by job id (the array's two tasks apart),
// by user, and by account from slurm_job_info (a job without it in "unknown"), never in a
// virtual cluster; the Kubernetes node's rows are what they are without Slurm, and a report
// without Slurm has no accounts.
func TestSlurmGrouping(t *testing.T) {
	kube, _, _, o := slurmWeek(t)
	onlyKube := compute(kube, o)
	assert.Empty(t, onlyKube.SlurmAccounts, "no Slurm, no accounts")
	require.Len(t, onlyKube.Jobs, 1)

	// The same week again: compute labels the series it is given.
	kube, slurm, info, o := slurmWeek(t)
	mixed := compute(inputs{taskUtil: append(kube.taskUtil, slurm.taskUtil...)}, o, info...)
	assert.Equal(t, map[string]float64{
		"alice~resnet": 1, "sweep (2001)": 1, "sweep (2002)": 1, "md-sim (2010)": 2, "interactive (2020)": 1,
	}, names(mixed.Jobs))
	assert.Equal(t, map[string]float64{"alice": 3, "bob": 2, "carol": 1}, names(mixed.Users))
	assert.Equal(t, names(onlyKube.VirtualClusters), names(mixed.VirtualClusters), "Slurm jobs are in no virtual cluster")
	require.Len(t, mixed.SlurmAccounts, 3)
	assert.Equal(t, map[string]float64{"physics": 2, "chemistry": 2, "unknown": 1}, names(mixed.SlurmAccounts))
	for _, a := range mixed.SlurmAccounts {
		switch a.Name {
		case "physics":
			assert.Equal(t, "alice", a.Username)
			assert.InDelta(t, 0.5, a.Efficiency, 1e-9, "80 % and 20 %")
		case "chemistry":
			assert.Equal(t, "bob", a.Username)
			assert.Equal(t, 2, a.GPUs)
		case "unknown":
			assert.Equal(t, "carol", a.Username, "slurm_job_info missing: the job's account is unknown")
		}
	}
	// As JSON: an unknown activity is NaN, which equals nothing.
	kubeRow, err := json.Marshal(onlyKube.Jobs[0])
	require.NoError(t, err)
	for _, j := range mixed.Jobs {
		if j.Name == onlyKube.Jobs[0].Name {
			row, rowErr := json.Marshal(j)
			require.NoError(t, rowErr)
			assert.JSONEq(t, string(kubeRow), string(row), "the Kubernetes job's row is unchanged")
		}
	}

	dir := t.TempDir()
	require.NoError(t, Write(dir, mixed))
	var accounts []byte
	accounts, err = os.ReadFile(filepath.Join(dir, FileSlurmAccounts))
	require.NoError(t, err)
	assert.Contains(t, string(accounts), "name,usernames,gpus,gpu_hours_held")
	assert.Contains(t, string(accounts), "\nphysics,alice,2,2,")
	page, err := os.ReadFile(filepath.Join(dir, FileHTML))
	require.NoError(t, err)
	assert.Contains(t, string(page), "<h2>Slurm accounts</h2>")
	kubeDir := t.TempDir()
	require.NoError(t, Write(kubeDir, onlyKube))
	assert.NoFileExists(t, filepath.Join(kubeDir, FileSlurmAccounts))
	page, err = os.ReadFile(filepath.Join(kubeDir, FileHTML))
	require.NoError(t, err)
	assert.NotContains(t, string(page), "Slurm")
}
