// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestXIDsOfOneCodeAcrossSeries(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{Start: start, End: start.Add(time.Hour), MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1}
	at := func(m time.Duration) int64 { return start.Add(m * time.Minute).UnixMilli() }
	gpu := func(instance string, kv ...string) model.Metric {
		l := model.Metric{"node_name": "n1", "minor_number": "0", "uuid": "GPU-0", "instance": model.LabelValue(instance)}
		for i := 0; i+1 < len(kv); i += 2 {
			l[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return l
	}
	in := inputs{xid: []series{
		// The agent moved to another port: a second series of the same GPU and code.
		{gpu("10.0.0.1:9102", "xid", "79"), []sample{{at(10), 1}, {at(11), 1}}},
		{gpu("10.0.0.1:9103", "xid", "79"), []sample{{at(30), 2}}},
		// A site that calls XID 13 reset_gpu: its own row, with that class's action.
		{gpu("10.0.0.1:9102", "xid", "13", "resolution", "reset_gpu"), []sample{{at(5), 1}}},
	}}
	r := compute(in, o)
	require.Len(t, r.GPUs, 1)
	assert.Equal(t, []XIDCount{
		{
			Code: "13", Count: 1, Resolution: "reset_gpu", Severity: "warning", Meaning: "Graphics engine exception",
			Action: "drain the GPU's jobs and reset the GPU (or reboot the node)",
		},
		{
			Code: "79", Count: 3, Resolution: "reboot", Severity: "fatal", Meaning: "GPU has fallen off the bus",
			Action: "drain the node, reboot it, and inspect the hardware if the XID comes back",
		},
	}, r.GPUs[0].XIDs)
	assert.Equal(t, 4.0, r.Summary.XIDs)
	assert.Equal(t, 1, r.Summary.GPUsWithErrors)
}

// TestSMAndTensorActivity: a job's SM and tensor activity are their means over the time GPM
// measured them; a busy job (efficiency at least BusyAtLeast) with SM activity below LowSMBelow is
// busy but inefficient, a busy job using its SMs is not, and a job on GPUs without GPM has no
// activity (null, never 0) and no flag. A task on a MIG slice, without utilization, adds no row.
func TestSMAndTensorActivity(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{
		Start: start, End: start.Add(time.Hour), MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1,
		IdleBelow: 10, IdleHeldUtilBelow: 1, IdleHeldMemoryAtLeast: 1, BusyAtLeast: 80, LowSMBelow: 30,
	}
	// constant is a value every minute over the hour.
	constant := func(v float64) []sample {
		var s []sample
		for m := 0; m <= 60; m++ {
			s = append(s, sample{start.Add(time.Duration(m) * time.Minute).UnixMilli(), v})
		}
		return s
	}
	task := func(job, minor string) model.Metric {
		return model.Metric{"node_name": "n1", "minor_number": model.LabelValue(minor), "uuid": model.LabelValue("GPU-" + minor), "job_name": model.LabelValue(job), "username": "u", "virtual_cluster": "vc"}
	}
	in := inputs{
		taskUtil: []series{
			{task("grace~tokenize", "2"), constant(96)},
			{task("alice~resnet", "0"), constant(92)},
			{task("dave~a100", "5"), constant(95)},
		},
		taskSM: []series{
			{task("grace~tokenize", "2"), constant(20)},
			{task("alice~resnet", "0"), constant(85)},
			{task("erin~mig", "3"), constant(50)}, // a MIG slice: no utilization, no row
		},
		taskTensor: []series{
			{task("grace~tokenize", "2"), constant(1)},
			{task("alice~resnet", "0"), constant(60)},
		},
	}
	r := compute(in, o)
	byJob := map[string]Usage{}
	for _, u := range r.Jobs {
		byJob[u.Name] = u
	}
	require.Len(t, byJob, 3)
	assert.InDelta(t, 20, float64(byJob["grace~tokenize"].SMActive), 1e-9)
	assert.InDelta(t, 1, float64(byJob["grace~tokenize"].TensorActive), 1e-9)
	assert.True(t, byJob["grace~tokenize"].BusyInefficient)
	assert.InDelta(t, 85, float64(byJob["alice~resnet"].SMActive), 1e-9)
	assert.False(t, byJob["alice~resnet"].BusyInefficient)
	assert.True(t, math.IsNaN(float64(byJob["dave~a100"].SMActive)), "no GPM: unknown, not 0")
	assert.False(t, byJob["dave~a100"].BusyInefficient)
	assert.InDelta(t, 52.5, float64(r.Summary.Jobs.SMActive), 1e-9, "all jobs: over the time measured on their GPUs")

	rows := usageCSV(r.Jobs, true)
	head := rows[0]
	require.Equal(t, []string{"sm_active_percent", "tensor_active_percent", "busy_but_inefficient"}, head[len(head)-3:])
	for _, row := range rows[1:] {
		if row[0] == "dave~a100" {
			assert.Equal(t, []string{"", "", "false"}, row[len(row)-3:], "unknown is empty in the CSV")
		}
	}
}
