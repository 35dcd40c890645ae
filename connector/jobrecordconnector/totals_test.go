// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
)

const (
	h100 = "NVIDIA H100 80GB HBM3"
	// The GPUs of the attribution's kubelet.yaml batch (node gpu-node-07).
	aliceGPU0  = "GPU-111ca12a-9a5c-2619-4711-155f288d8c93"
	aliceGPU1  = "GPU-2fe42a76-5bfc-72a1-0057-4d8aea153462"
	sharedGPU  = "GPU-fc9ac319-d283-fd55-d7d5-12fb12dabe01" // bob~explore and team-c/notebook-carol
	migGPU     = "GPU-6e9f8cb2-6761-bd29-f75d-b5db1987e014" // dave~bert's MIG slice
	daveSlice  = "MIG-e2fc6e45-ce94-8fc9-da37-29e8acea9c00"
	otherSlice = "MIG-00000000-0000-0000-0000-000000000001"
)

// kubeletNodeGPUs is one collection of the GPUs of kubelet.yaml's node: each GPU at a
// constant power (W), so its energy counter at collection i is 1 MJ + power·i·interval.
func kubeletNodeGPUs(node string, i int) []gpu {
	e := func(watts float64) float64 { return 1e6 + watts*float64(i)*interval.Seconds() }
	return []gpu{
		{node: node, uuid: aliceGPU0, minor: "0", model: h100, energy: e(250)},
		{node: node, uuid: aliceGPU1, minor: "1", model: h100, energy: e(250)},
		{node: node, uuid: sharedGPU, minor: "2", model: h100, energy: e(200)},
		// A 40 GB slice beside a 10 GB one: dave's is a quarter of the GPU's MIG memory.
		{node: node, uuid: migGPU, minor: "3", model: h100, energy: e(100), migMemory: map[string]float64{daveSlice: 10e9, otherSlice: 30e9}},
	}
}

// TestAttributionBatches runs the attribution's real output for 10 minutes (21 collections
// 30 s apart), then lets end_after pass: each job of the batch gets one record, with the
// batch's values, its share of shared GPUs and MIG slices, and its GPUs' energy.
func TestAttributionBatches(t *testing.T) {
	clk := clock.NewFake(t0)
	c, sink := newTestRecorder(t, testConfig(), clk)
	batch := kubeletBatch(t)
	const n = 21
	for i := range n {
		ts := t0.Add(time.Duration(i) * interval)
		moveTo(clk, ts)
		consume(t, c, gpuSeries(ts, kubeletNodeGPUs("gpu-node-07", i)...))
		consume(t, c, at(batch, ts))
	}
	last := clk.Now()
	moveTo(clk, last.Add(testConfig().EndAfter-time.Second))
	c.check(t.Context())
	assert.Empty(t, sink.AllLogs(), "no job has ended before end_after")
	moveTo(clk, last.Add(testConfig().EndAfter))
	c.check(t.Context())
	got := records(t, sink)
	assert.Len(t, got, 7)

	held := (n - 1) * interval.Seconds() / 3600 // the first collection starts the count
	alice := got["alice~resnet"]
	assert.Equal(t, map[string]string{"virtual_cluster": "default", "username": "alice", "job_name": "alice~resnet"}, alice.Job)
	assert.Equal(t, "alice", alice.User)
	assert.Equal(t, t0, alice.Start)
	assert.Equal(t, last, alice.End)
	require.Len(t, alice.GPUs, 2)
	assert.Equal(t, []string{h100}, alice.Models())
	assert.InDelta(t, 2*held, alice.HeldHours, 1e-9)
	assert.InDelta(t, 2*held, alice.AllocatedHours, 1e-9)
	assert.InDelta(t, 2*held*0.6, alice.UsedHours, 1e-9)
	assert.InDelta(t, 60, alice.UtilizationMean, 1e-9)
	assert.InDelta(t, 60, alice.UtilizationPeak, 1e-9)
	assert.InDelta(t, 48.828125, alice.MemoryMean, 1e-9)
	assert.InDelta(t, 2*250*600.0, alice.EnergyJoules, 1e-6)
	assert.Nil(t, alice.SMActiveHours, "no GPM in this batch")
	assert.Equal(t, jobrecord.VerdictUnderused, alice.Verdict)

	// bob and carol time-slice one GPU: each holds it, each is charged half, and half its energy.
	for _, name := range []string{"bob~explore", "team-c/notebook-carol"} {
		r := got[name]
		assert.InDelta(t, held, r.HeldHours, 1e-9, name)
		assert.InDelta(t, held/2, r.AllocatedHours, 1e-9, name)
		assert.InDelta(t, 200*600.0/2, r.EnergyJoules, 1e-6, name)
	}
	assert.Equal(t, "unknown", got["team-c/notebook-carol"].User)
	assert.InDelta(t, 45, got["bob~explore"].UtilizationMean, 1e-9)

	dave := got["dave~bert"]
	require.Len(t, dave.GPUs, 1)
	assert.Equal(t, daveSlice, dave.GPUs[0].MIGUUID)
	assert.InDelta(t, held/4, dave.AllocatedHours, 1e-9, "a quarter of the GPU's MIG memory")
	assert.Equal(t, jobrecord.VerdictUnknown, dave.Verdict, "a MIG slice has no utilization")

	assert.Equal(t, jobrecord.VerdictIdle, got["grace~queued"].Verdict)

	sink.Reset()
	clk.Advance(time.Hour)
	c.check(t.Context())
	assert.Empty(t, sink.AllLogs(), "a job's record is sent once")
	assert.Empty(t, c.totals.Jobs)
	assert.Empty(t, c.totals.GPUs, "the facts of GPUs nobody holds and that are gone are forgotten")
}

// TestScenario checks a record against what happened: a job on two GPUs for an hour at 30 s
// collections, whose power changes, one GPU throttled for 10 minutes, an XID, an agent restart
// (its XID counter starts again) and an ECC error. Held GPU-hours and energy are within one
// collection of the truth, the events exact.
func TestScenario(t *testing.T) {
	clk := clock.NewFake(t0)
	c, sink := newTestRecorder(t, testConfig(), clk)
	batch := kubeletBatch(t)
	const n = 120 // collections: the job holds its GPUs from t0 for an hour
	var e0, e1 float64
	for i := range n {
		ts := t0.Add(time.Duration(i) * interval)
		moveTo(clk, ts)
		g0 := gpu{node: "gpu-node-07", uuid: aliceGPU0, minor: "0", model: h100, energy: e0}
		g1 := gpu{node: "gpu-node-07", uuid: aliceGPU1, minor: "1", model: h100, energy: e1}
		if i >= 40 && i < 60 {
			g0.reasons = []string{"power_cap", "gpu_idle"} // gpu_idle is not throttling
		}
		restart := ts.Add(-time.Duration(i-70) * interval) // the agent restarts at collection 70
		switch {
		case i >= 50 && i < 70:
			g1.xids = map[string]float64{"79": 1}
		case i >= 70:
			g1.xids = map[string]float64{"79": 1} // the same value, a new series: a second XID
		}
		if i >= 80 {
			g0.ecc = map[string]float64{"single": 2, "double": 0}
		} else {
			g0.ecc = map[string]float64{"single": 0, "double": 0}
		}
		gs := gpuSeries(ts, g0, g1)
		if i >= 70 {
			forEachDataPoint(gs, func(dp pmetric.NumberDataPoint) {
				if dp.StartTimestamp() == 0 {
					dp.SetStartTimestamp(pcommon.NewTimestampFromTime(restart))
				}
			})
		}
		// 300 W on GPU 0 for the first half hour, then 150 W; GPU 1 at 200 W throughout.
		if i < n/2 {
			e0 += 300 * interval.Seconds()
		} else {
			e0 += 150 * interval.Seconds()
		}
		e1 += 200 * interval.Seconds()
		if i == 71 || i == 72 {
			continue // the agent's restart: two collections missing, within max_gap
		}
		consume(t, c, gs)
		consume(t, c, at(batch, ts))
	}
	clk.Advance(testConfig().EndAfter)
	c.check(t.Context())
	r := records(t, sink)["alice~resnet"]

	const truthHeld = 2.0                              // GPU-hours: two GPUs, one hour
	const truthEnergy = 300*1800 + 150*1800 + 200*3600 // joules
	oneCollection := 2 * interval.Hours()
	assert.InDelta(t, truthHeld, r.HeldHours, oneCollection)
	assert.InDelta(t, truthEnergy, r.EnergyJoules, (300+200)*interval.Seconds())
	assert.InDelta(t, 600, r.ThrottledSeconds, interval.Seconds(), "GPU 0 throttled by power for 10 minutes")
	assert.Equal(t, map[string]float64{"power_cap": r.ThrottledSeconds}, r.ThrottleReasons)
	assert.Equal(t, map[string]int64{"79": 2}, r.XIDs, "one XID before the agent's restart, one after")
	assert.Equal(t, int64(2), r.ECCSingleBit)
	assert.Equal(t, int64(0), r.ECCDoubleBit)
	assert.Zero(t, r.UnknownSeconds, "the restart's gap is within max_gap")
}

// TestGapLongerThanMaxGap: time between two collections further apart than max_gap is
// unknown, in no other total.
func TestGapLongerThanMaxGap(t *testing.T) {
	clk := clock.NewFake(t0)
	c, sink := newTestRecorder(t, testConfig(), clk)
	batch := kubeletBatch(t)
	for _, ts := range []time.Time{t0, t0.Add(interval), t0.Add(interval + 6*time.Minute), t0.Add(2*interval + 6*time.Minute)} {
		moveTo(clk, ts)
		consume(t, c, at(batch, ts))
	}
	clk.Advance(testConfig().EndAfter)
	c.check(t.Context())
	r := records(t, sink)["frank~sweep"]
	assert.InDelta(t, 2*interval.Hours(), r.HeldHours, 1e-9)
	assert.InDelta(t, 360, r.UnknownSeconds, 1e-9)
}

// TestTwoNodesOneRecord: a job whose tasks run on two nodes is one record with the GPUs of both.
func TestTwoNodesOneRecord(t *testing.T) {
	clk := clock.NewFake(t0)
	c, sink := newTestRecorder(t, testConfig(), clk)
	batch := kubeletBatch(t)
	for i := range 11 {
		ts := t0.Add(time.Duration(i) * interval)
		moveTo(clk, ts)
		for _, node := range []string{"gpu-node-07", "gpu-node-08"} {
			consume(t, c, gpuSeries(ts, kubeletNodeGPUs(node, i)...))
			consume(t, c, at(onNode(batch, node), ts))
		}
	}
	clk.Advance(testConfig().EndAfter)
	c.check(t.Context())
	got := records(t, sink)
	assert.Len(t, got, 7, "one record per job, not per node")
	alice := got["alice~resnet"]
	require.Len(t, alice.GPUs, 4)
	nodes := map[string]int{}
	for _, g := range alice.GPUs {
		nodes[g.NodeName]++
	}
	assert.Equal(t, map[string]int{"gpu-node-07": 2, "gpu-node-08": 2}, nodes)
	assert.InDelta(t, 4*10*interval.Hours(), alice.HeldHours, 1e-9)
	assert.InDelta(t, 4*250*300.0, alice.EnergyJoules, 1e-6)
}

// TestJobLabelsFromConfig: a job is whatever job_labels name (here each pod); series without
// them are no job's.
func TestJobLabelsFromConfig(t *testing.T) {
	for _, tt := range []struct {
		labels []string
		want   []string
	}{
		{[]string{"pod_name"}, []string{"bert-0", "notebook-bob", "notebook-carol", "odd-0", "resnet-0", "sweep-3", "waiting-0"}},
		{[]string{"slurm_cluster", "slurm_job_id"}, nil},
	} {
		clk := clock.NewFake(t0)
		cfg := testConfig()
		cfg.JobLabels = tt.labels
		c, sink := newTestRecorder(t, cfg, clk)
		batch := kubeletBatch(t)
		for i := range 3 {
			ts := t0.Add(time.Duration(i) * interval)
			moveTo(clk, ts)
			consume(t, c, at(batch, ts))
		}
		clk.Advance(cfg.EndAfter)
		c.check(t.Context())
		var names []string
		for _, ld := range sink.AllLogs() {
			for _, rl := range ld.ResourceLogs().All() {
				for _, sl := range rl.ScopeLogs().All() {
					for _, lr := range sl.LogRecords().All() {
						r, err := jobrecord.FromLogRecord(lr)
						require.NoError(t, err)
						names = append(names, r.Job[tt.labels[0]])
					}
				}
			}
		}
		assert.Equal(t, tt.want, names, "job_labels %v", tt.labels)
	}
}

// TestCollectionsInOneBatch: a batch that holds two collections (an agent's queue drained after
// an outage) counts each, and a time-sliced GPU's share is of its collection's tasks.
func TestCollectionsInOneBatch(t *testing.T) {
	clk := clock.NewFake(t0)
	c, sink := newTestRecorder(t, testConfig(), clk)
	batch := kubeletBatch(t)
	for i := 0; i < 4; i += 2 {
		both := at(batch, t0.Add(time.Duration(i)*interval))
		at(batch, t0.Add(time.Duration(i+1)*interval)).ResourceMetrics().MoveAndAppendTo(both.ResourceMetrics())
		consume(t, c, both)
	}
	clk.Advance(testConfig().EndAfter)
	c.check(t.Context())
	bob := records(t, sink)["bob~explore"]
	assert.InDelta(t, 3*interval.Hours(), bob.HeldHours, 1e-9)
	assert.InDelta(t, 3*interval.Hours()/2, bob.AllocatedHours, 1e-9, "half of the GPU, not a quarter")
}
