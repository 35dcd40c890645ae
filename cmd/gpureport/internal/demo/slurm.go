// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"iter"
	"strconv"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/fixture"
)

// slurmNodes are the demo's Slurm node pool: GPUs whose jobs Slurm runs, as a Slurm node's agent
// labels them (docs/metrics.md, "Slurm jobs": the task series by slurm_job_id and step,
// slurm_job_info one per job with its account).
var slurmNodes = []node{
	{"slurm-node-01", "10.0.0.21:9102", []int{1, 1, 2}, false},
}

// slurmAccounts are the demo users' Slurm accounts.
var slurmAccounts = map[string]string{
	"alice": "physics", "bob": "chemistry", "carol": "chemistry", "dave": "physics", "erin": "vision", "frank": "vision",
}

// slurmJob is a job on a Slurm node: its batch step holds the allocation's GPUs.
type slurmJob struct {
	id, user, account, name string
	// arrayJobID and arrayTaskID place a sweep in a job array (each of its tasks a job).
	arrayJobID, arrayTaskID string
}

// newSlurmJob is the Slurm job of the n-th demo job on node, nil on a Kubernetes node. A job's
// name is its kind's: Slurm users submit the same script again, so names repeat and ids do not.
func newSlurmJob(node, n int, user string, kind jobKind) *slurmJob {
	if node < len(kubeNodes) {
		return nil
	}
	j := &slurmJob{id: strconv.Itoa(5000 + n), user: user, account: slurmAccounts[user], name: kind.name}
	if kind.profile == sweep {
		j.arrayJobID, j.arrayTaskID = j.id, "0"
	}
	return j
}

// labels are the labels of the allocation's task series on gpu.
func (a allocation) labels(gpu fixture.GPU) fixture.Labels {
	if a.slurm == nil {
		return a.task.Labels(gpu)
	}
	const unknown = "unknown" // the task labels a Slurm step has none of
	return gpu.Labels().With(
		"slurm_job_id", a.slurm.id, "slurm_step", "batch", "username", a.slurm.user, "job_name", a.slurm.name,
		"role_name", unknown, "task_index", unknown, "job_instance_id", unknown, "virtual_cluster", unknown,
		"namespace", unknown, "pod_name", unknown, "container_name", unknown, "container_id", unknown,
	)
}

// writeSlurmJobInfo writes slurm_job_info, 1 while each Slurm job runs.
func writeSlurmJobInfo(om *fixture.Writer, allocs [][]allocation, gauge func(n int, v func(time.Time) (float64, bool)) iter.Seq2[int64, float64]) {
	om.Gauge("slurm_job_info", "One per Slurm job with a step on the node, always 1.")
	for n := len(kubeNodes); n < len(nodes); n++ {
		for i := range allocs[n] {
			a := &allocs[n][i]
			labels := fixture.Labels{
				"job": fixture.ScrapeJob, "instance": nodes[n].instance, "node_name": nodes[n].name,
				"slurm_job_id": a.slurm.id, "username": a.slurm.user, "job_name": a.slurm.name,
				"slurm_account": a.slurm.account, "slurm_partition": "gpu",
				"slurm_array_job_id": a.slurm.arrayJobID, "slurm_array_task_id": a.slurm.arrayTaskID,
				"simulated": "true",
			}
			om.Series(labels, gauge(n, func(t time.Time) (float64, bool) { return 1, !t.Before(a.from) && t.Before(a.to) }))
		}
	}
}
