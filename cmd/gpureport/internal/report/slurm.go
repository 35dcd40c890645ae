// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"

	"github.com/prometheus/common/model"
)

// A Slurm node's task series carry the job's id (docs/metrics.md, "Slurm jobs"); its account is
// on slurm_job_info, one series per job and node, joined on instance and the job id.
const (
	metricSlurmJobInfo = "slurm_job_info"
	labelSlurmJobID    = "slurm_job_id"
	labelSlurmAccount  = "slurm_account"
	labelInstance      = "instance"
	// unknownAccount groups a Slurm job whose slurm_job_info the period does not hold.
	unknownAccount = "unknown"
)

// slurmAccounts are the accounts of the Slurm jobs by instance and job id.
type slurmAccounts map[[2]model.LabelValue]model.LabelValue

func newSlurmAccounts(info []series) slurmAccounts {
	accounts := slurmAccounts{}
	for _, s := range info {
		accounts[[2]model.LabelValue{s.labels[labelInstance], s.labels[labelSlurmJobID]}] = s.labels[labelSlurmAccount]
	}
	return accounts
}

// label gives each Slurm task series its job's account and a job name that tells its jobs
// apart: Slurm's job names repeat (an array's tasks, a script submitted again), its ids do not,
// so a Slurm job is "<job_name> (<slurm_job_id>)". Series without a job id are left alone.
func (a slurmAccounts) label(sets ...[]series) {
	for _, set := range sets {
		for i := range set {
			l := set[i].labels
			id := l[labelSlurmJobID]
			if id == "" {
				continue
			}
			account, ok := a[[2]model.LabelValue{l[labelInstance], id}]
			if !ok || account == "" {
				account = unknownAccount
			}
			l[labelSlurmAccount] = account
			l[labelJob] = model.LabelValue(fmt.Sprintf("%s (%s)", l[labelJob], id))
		}
	}
}

// inGroup tells whether a task series counts in the grouping by label: a Slurm job's in its
// account and in no virtual cluster (it has none), a Kubernetes task's in no account.
func inGroup(label string, l model.Metric) bool {
	slurm := l[labelSlurmJobID] != ""
	switch label {
	case labelSlurmAccount:
		return slurm
	case labelVirtualCluster:
		return !slurm
	}
	return true
}

// withUsers names the users of each account row.
func withUsers(rows []Usage, byName map[string]*usageAcc) []Usage {
	for i := range rows {
		rows[i].Username = joinKeys(byName[rows[i].Name].usernames)
	}
	return rows
}

// accountCSV is slurm_accounts.csv: usage's columns, the account's users after its name.
func accountCSV(rows []Usage) [][]string {
	out := usageCSV(rows, false)
	out[0] = append([]string{out[0][0], "usernames"}, out[0][1:]...)
	for i := range rows {
		out[i+1] = append([]string{out[i+1][0], rows[i].Username}, out[i+1][1:]...)
	}
	return out
}
