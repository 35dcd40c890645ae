// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package report

import (
	"context"
	"iter"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/fixture"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/promlocal"
)

// The known data: a four-hour window from t0, two nodes, three GPUs, three jobs.
//
//   - node-a scrapes every 30 s until t0+2h, then every 60 s (a scrape-interval change).
//     GPU a0: alice~train, utilization 80 % for the first hour, 5 % the second, 50 % after;
//     framebuffer 40 %. XID 13 (counter 2 → 3 at t0+30m → 5 at t0+2h30m) with resolution
//     "reboot", a site's override of the table's "restart_app".
//     GPU a1: alice~train, 100 % until t0+2h, then 0 %; framebuffer 60 % until t0+3h, then 0 %
//     (idle-held for one hour). It falls off the bus at t0+3h30m: gpu_up 0 for 15 minutes,
//     during which none of its other series exists; XID 79 (first seen at t0+3h30m with 1,
//     no resolution label: the table says reboot), a double-bit ECC error and an uncorrectable
//     remapped row at t0+3h, remap pending from then on.
//   - node-b scrapes every 30 s; its agent is down from t0+1h to t0+1h20m (a gap) and comes back
//     with its counters restarted.
//     GPU b0: bob~infer from t0+30m to t0+3h (20 % until t0+2h, then 0 %; framebuffer 10 %),
//     then alice~eval (90 %, framebuffer 50 %). Before bob, the GPU idles at 0 %.
//     XID 31: 1 before the window, 2 at t0+50m; after the restart the series starts again at
//     t0+2h with 1 (two XIDs in the window). Single-bit ECC 10 → 12 at t0+3h.
//
// All series begin 10 minutes before the window and end 10 minutes after it, so that clipping
// is tested at both ends.
var (
	t0     = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	gpuA0  = fixture.GPU{Node: "node-a", Instance: "10.0.0.1:9102", Minor: 0, UUID: "GPU-a0"}
	gpuA1  = fixture.GPU{Node: "node-a", Instance: "10.0.0.1:9102", Minor: 1, UUID: "GPU-a1"}
	gpuB0  = fixture.GPU{Node: "node-b", Instance: "10.0.0.2:9102", Minor: 0, UUID: "GPU-b0"}
	train  = task("alice", "alice~train", "prod", "c1")
	infer  = task("bob", "bob~infer", "dev", "c2")
	eval   = task("alice", "alice~eval", "dev", "c3")
	before = -10 * time.Minute
	after  = 4*time.Hour + 10*time.Minute
)

func task(user, job, vc, container string) fixture.Task {
	return fixture.Task{
		Username: user, JobName: job, RoleName: "worker", TaskIndex: "0",
		JobInstanceID: "0_" + container, VirtualCluster: vc, Namespace: "pai",
		PodName: job + "-worker-0", ContainerName: "main", ContainerID: container,
	}
}

// scrapes are the times (offsets from t0) at which a node's agent was scraped successfully.
func scrapes(node string) []time.Duration {
	var out []time.Duration
	switch node {
	case "node-a":
		for d := before; d < 2*time.Hour; d += 30 * time.Second {
			out = append(out, d)
		}
		for d := 2 * time.Hour; d <= after; d += time.Minute {
			out = append(out, d)
		}
	case "node-b":
		for d := before; d <= after; d += 30 * time.Second {
			if d < time.Hour || d >= time.Hour+20*time.Minute {
				out = append(out, d)
			}
		}
	}
	return out
}

// lost is when GPU a1 is off the bus: only gpu_up (0) is reported.
func lost(g fixture.GPU, d time.Duration) bool {
	return g == gpuA1 && d >= 3*time.Hour+30*time.Minute && d < 3*time.Hour+45*time.Minute
}

// samples yields value(d) at every scrape of g's node for which value reports ok.
func samples(g fixture.GPU, value func(d time.Duration) (float64, bool)) iter.Seq2[int64, float64] {
	return func(yield func(int64, float64) bool) {
		for _, d := range scrapes(g.Node) {
			if v, ok := value(d); ok && !yield(t0.Add(d).UnixMilli(), v) {
				return
			}
		}
	}
}

func step(d, at time.Duration, before, after float64) float64 {
	if d < at {
		return before
	}
	return after
}

type taskOnGPU struct {
	task     fixture.Task
	gpu      fixture.GPU
	from, to time.Duration // the task holds the GPU in [from, to)
	util     func(time.Duration) float64
	mem      func(time.Duration) float64
}

var tasks = []taskOnGPU{
	{
		train, gpuA0, before, after + time.Second,
		func(d time.Duration) float64 { return step(d, time.Hour, 80, step(d, 2*time.Hour, 5, 50)) },
		func(time.Duration) float64 { return 40 },
	},
	{
		train, gpuA1, before, after + time.Second,
		func(d time.Duration) float64 { return step(d, 2*time.Hour, 100, 0) },
		func(d time.Duration) float64 { return step(d, 3*time.Hour, 60, 0) },
	},
	{
		infer, gpuB0, 30 * time.Minute, 3 * time.Hour,
		func(d time.Duration) float64 { return step(d, 2*time.Hour, 20, 0) },
		func(time.Duration) float64 { return 10 },
	},
	{
		eval, gpuB0, 3 * time.Hour, after + time.Second,
		func(time.Duration) float64 { return 90 },
		func(time.Duration) float64 { return 50 },
	},
}

func present(g fixture.GPU) func(time.Duration) bool {
	return func(d time.Duration) bool { return !lost(g, d) }
}

// deviceUtil is what gpu_utilization says: the task's utilization, 0 where no task runs.
func deviceUtil(g fixture.GPU, d time.Duration) float64 {
	for i := range tasks {
		t := &tasks[i]
		if t.gpu == g && d >= t.from && d < t.to {
			return t.util(d)
		}
	}
	return 0
}

func writeKnownData(t *testing.T, path string) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w := fixture.NewWriter(f)
	gpus := []fixture.GPU{gpuA0, gpuA1, gpuB0}
	always := func(g fixture.GPU, v func(time.Duration) float64) iter.Seq2[int64, float64] {
		return samples(g, func(d time.Duration) (float64, bool) { return v(d), present(g)(d) })
	}

	w.Gauge("task_gpu_percent", "Utilization of each GPU allocated to the task.")
	for i := range tasks {
		tg := &tasks[i]
		w.Series(tg.task.Labels(tg.gpu), samples(tg.gpu, func(d time.Duration) (float64, bool) {
			return tg.util(d), d >= tg.from && d < tg.to && present(tg.gpu)(d)
		}))
	}
	w.Gauge("task_gpu_mem_percent", "Framebuffer used/total of each GPU allocated to the task.")
	for i := range tasks {
		tg := &tasks[i]
		w.Series(tg.task.Labels(tg.gpu), samples(tg.gpu, func(d time.Duration) (float64, bool) {
			return tg.mem(d), d >= tg.from && d < tg.to && present(tg.gpu)(d)
		}))
	}
	w.Gauge("gpu_utilization", "Percent of time a kernel ran on the GPU.")
	for _, g := range gpus {
		w.Series(g.Labels().With("vender", "nvidia"), always(g, func(d time.Duration) float64 { return deviceUtil(g, d) }))
	}
	w.Gauge("gpu_up", "1 while the GPU answers NVML.")
	for _, g := range gpus {
		w.Series(g.Labels(), samples(g, func(d time.Duration) (float64, bool) {
			if lost(g, d) {
				return 0, true
			}
			return 1, true
		}))
	}
	w.Counter("gpu_xid_errors_total", "XID errors per GPU and code.")
	w.Series(gpuA0.Labels().With("xid", "13", "resolution", "reboot"), always(gpuA0, func(d time.Duration) float64 {
		return step(d, 30*time.Minute, 2, step(d, 2*time.Hour+30*time.Minute, 3, 5))
	}))
	w.Series(gpuA1.Labels().With("xid", "79"), samples(gpuA1, func(d time.Duration) (float64, bool) {
		return 1, d >= 3*time.Hour+30*time.Minute
	}))
	w.Series(gpuB0.Labels().With("xid", "31"), samples(gpuB0, func(d time.Duration) (float64, bool) {
		switch {
		case d < time.Hour:
			return step(d, 50*time.Minute, 1, 2), true
		case d >= 2*time.Hour:
			return 1, true
		}
		return 0, false // restarted agent: no XID yet, no series
	}))
	w.Gauge("nvidiasmi_ecc_error_count", "Volatile ECC errors.")
	for _, g := range gpus {
		w.Series(g.Labels().With("type", "single"), always(g, func(d time.Duration) float64 {
			if g == gpuB0 {
				return step(d, 3*time.Hour, 10, 12)
			}
			return 0
		}))
		w.Series(g.Labels().With("type", "double"), always(g, func(d time.Duration) float64 {
			if g == gpuA1 {
				return step(d, 3*time.Hour, 0, 1)
			}
			return 0
		}))
	}
	w.Gauge("gpu_remapped_rows", "Memory rows remapped after errors.")
	for _, g := range gpus {
		for _, typ := range []string{"corrected", "uncorrected"} {
			w.Series(g.Labels().With("error_type", typ), always(g, func(d time.Duration) float64 {
				if g == gpuA1 && typ == "uncorrected" {
					return step(d, 3*time.Hour, 0, 1)
				}
				return 0
			}))
		}
	}
	w.Gauge("gpu_remapped_rows_pending", "1 when a row remapping waits for a GPU reset.")
	for _, g := range gpus {
		w.Series(g.Labels(), always(g, func(d time.Duration) float64 {
			if g == gpuA1 {
				return step(d, 3*time.Hour, 0, 1)
			}
			return 0
		}))
	}
	w.Gauge("gpu_remapped_rows_failed", "1 when a row remapping failed.")
	for _, g := range gpus {
		w.Series(g.Labels(), always(g, func(time.Duration) float64 { return 0 }))
	}
	require.NoError(t, w.Close())
}

// startKnownPrometheus backfills the known data into a real Prometheus and returns its API.
func startKnownPrometheus(t *testing.T) v1.API {
	dir := t.TempDir()
	om := filepath.Join(dir, "known.om")
	writeKnownData(t, om)
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	require.NoError(t, promlocal.Backfill(ctx, om, data))
	srv, err := promlocal.Start(ctx, data)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	client, err := api.NewClient(api.Config{Address: srv.URL})
	require.NoError(t, err)
	return v1.NewAPI(client)
}

func knownOptions() Options {
	return Options{
		Start: t0, End: t0.Add(4 * time.Hour), MaxGap: 5 * time.Minute,
		IdleBelow: 10, IdleHeldUtilBelow: 1, IdleHeldMemoryAtLeast: 1,
		Bucket: time.Hour, Chunk: 90 * time.Minute, NodesPerQuery: 16,
	}
}

// The hand computation, in minutes of GPU time (h = minutes / 60).
//
// alice~train, a0: 60 min at 80, 60 at 5, 120 at 50 (30 s then 60 s samples: time, not counts).
// alice~train, a1: 120 at 100, then 0 % for 120 minus the 15 lost minutes (unknown) = 105;
// of those, 60 hold 60 % framebuffer (idle-held), 45 hold none.
// bob~infer, b0: known 30 (t0+30m..1h) + 40 (1h20m..2h) at 20, 60 at 0; 20 unknown (the gap);
// framebuffer 10 % all along, so its 60 idle minutes are idle-held.
// alice~eval, b0: 60 at 90.
func TestReport(t *testing.T) {
	prom := startKnownPrometheus(t)
	r, err := Build(t.Context(), prom, knownOptions())
	require.NoError(t, err)
	t.Run("equals the hand computation", func(t *testing.T) { assertHandComputation(t, r) })
	t.Run("counting samples is right only at a constant interval", func(t *testing.T) {
		// OpenPAI's weekly mail: count_over_time(task_gpu_percent[...]) × 30 s as GPU time.
		counted := func(job, uuid string) time.Duration {
			v, _, _, err := prom.Query(t.Context(),
				`count_over_time(task_gpu_percent{job_name="`+job+`",uuid="`+uuid+`"}[4h])`, t0.Add(4*time.Hour-time.Millisecond))
			require.NoError(t, err)
			vec, ok := v.(model.Vector)
			require.True(t, ok && len(vec) == 1, "%v", v)
			return time.Duration(vec[0].Value) * 30 * time.Second
		}
		// alice~eval on b0 is scraped every 30 s: the count agrees with the time (1 h).
		assert.Equal(t, time.Hour, counted("alice~eval", "GPU-b0"))
		// alice~train held a0 for all 4 h, but node-a's scrape interval doubled after 2 h.
		assert.Equal(t, 3*time.Hour, counted("alice~train", "GPU-a0"), "what counting says")
	})
	t.Run("is the same node by node", func(t *testing.T) {
		o := knownOptions()
		o.NodesPerQuery = 1
		byNode, err := Build(t.Context(), prom, o)
		require.NoError(t, err)
		if d := cmp.Diff(r, byNode, sameNum); d != "" {
			t.Errorf("one node per query (-all at once +by node):\n%s", d)
		}
	})
	dir := t.TempDir()
	require.NoError(t, Write(dir, r))
	t.Run("json and csv carry the same numbers", func(t *testing.T) { assertFiles(t, dir, r) })
	t.Run("page renders in chromium", func(t *testing.T) { assertPageRenders(t, dir, r) })
}

func assertHandComputation(t *testing.T, r *Report) {
	h := func(minutes float64) float64 { return minutes / 60 }

	train := Usage{
		Name: "alice~train", Username: "alice", VirtualCluster: "prod", GPUs: 2,
		HeldHours: h(240 + 225), UsedHours: h(60*0.8 + 60*0.05 + 120*0.5 + 120*1.0),
		IdleHours: h(60 + 105), IdleHeldHours: h(60), UnknownHours: h(15),
		PeakUtil: 100,
		// 0 % for 105, 5 % for 60 (165 of 465), 50 % for 120 (285 ≥ 232.5).
		MedianUtil: 50,
	}
	train.Efficiency = (60*0.8 + 60*0.05 + 120*0.5 + 120*1.0) / (240 + 225)
	infer := Usage{
		Name: "bob~infer", Username: "bob", VirtualCluster: "dev", GPUs: 1,
		HeldHours: h(130), UsedHours: h(70 * 0.2), Efficiency: 70 * 0.2 / 130,
		IdleHours: h(60), IdleHeldHours: h(60), UnknownHours: h(20),
		// 0 % for 60 of 130 < 65, then 20 %.
		PeakUtil: 20, MedianUtil: 20,
	}
	eval := Usage{
		Name: "alice~eval", Username: "alice", VirtualCluster: "dev", GPUs: 1,
		HeldHours: h(60), UsedHours: h(54), Efficiency: 0.9, PeakUtil: 90, MedianUtil: 90,
	}
	assertUsages(t, []Usage{train, infer, eval}, r.Jobs)

	alice := Usage{
		Name: "alice", GPUs: 3,
		HeldHours: h(465 + 60), UsedHours: h(231 + 54), Efficiency: (231.0 + 54) / (465 + 60),
		IdleHours: h(165), IdleHeldHours: h(60), UnknownHours: h(15), PeakUtil: 100,
		// 0 % 105, 5 % 60 (165), 50 % 120 (285 ≥ 262.5).
		MedianUtil: 50,
	}
	bob := infer
	bob.Name, bob.Username, bob.VirtualCluster = "bob", "", ""
	assertUsages(t, []Usage{alice, bob}, r.Users)

	prod := train
	prod.Name, prod.Username, prod.VirtualCluster = "prod", "", ""
	dev := Usage{
		Name: "dev", GPUs: 1,
		HeldHours: h(190), UsedHours: h(14 + 54), Efficiency: 68.0 / 190,
		IdleHours: h(60), IdleHeldHours: h(60), UnknownHours: h(20), PeakUtil: 90,
		// 0 % 60, 20 % 70 (130 ≥ 95).
		MedianUtil: 20,
	}
	assertUsages(t, []Usage{prod, dev}, r.VirtualClusters)

	assert.False(t, r.Simulated, "no series is marked simulated")
	s := r.Summary
	assertUsages(t, []Usage{{
		Name: "all jobs", GPUs: 3,
		HeldHours: h(655), UsedHours: h(231 + 14 + 54), Efficiency: 299.0 / 655,
		IdleHours: h(225), IdleHeldHours: h(120), UnknownHours: h(35), PeakUtil: 100,
		// 0 % for 105 + 60, 5 % for 60 (225), 20 % for 70 (295), 50 % for 120 (415 ≥ 327.5).
		MedianUtil: 50,
	}}, []Usage{s.Jobs})
	assert.Equal(t, 4, s.TaskSeries)
	// gpu_utilization over the known time of every GPU: a0 240 min, a1 225, b0 220 (the gap
	// is unknown); b0 idles at 0 % for its first 30 minutes.
	assert.InDelta(t, (60*80+60*5+120*50+120*100+70*20+60*90.0)/(240+225+220), s.GPUUtilization, 1e-12)
	assert.Equal(t, 3, s.GPUs)
	assert.InDelta(t, 0.25, s.UnavailableHours, 1e-12)
	assert.Equal(t, 3.0+1+2, s.XIDs)
	assert.Equal(t, 3, s.GPUsWithErrors)

	require.Len(t, r.GPUs, 3)
	a0, a1, b0 := r.GPUs[0], r.GPUs[1], r.GPUs[2]
	assert.Equal(t, GPU{
		Node: "node-a", MinorNumber: "0", UUID: "GPU-a0", AvailableHours: 4,
		XIDs: []XIDCount{{
			Code: "13", Count: 3, Resolution: "reboot", Severity: "warning", Meaning: "Graphics engine exception",
			Action: "drain the node, reboot it, and inspect the hardware if the XID comes back",
		}},
	}, a0)
	assert.Equal(t, GPU{
		Node: "node-a", MinorNumber: "1", UUID: "GPU-a1",
		AvailableHours: 3.75, UnavailableHours: 0.25,
		XIDs: []XIDCount{{
			Code: "79", Count: 1, Resolution: "reboot", Severity: "fatal", Meaning: "GPU has fallen off the bus",
			Action: "drain the node, reboot it, and inspect the hardware if the XID comes back",
		}},
		ECCDouble: 1, RemappedRows: 1, RemapPending: true,
	}, a1)
	assert.Equal(t, GPU{
		Node: "node-b", MinorNumber: "0", UUID: "GPU-b0",
		AvailableHours: h(220), UnknownHours: h(20),
		XIDs: []XIDCount{{
			Code: "31", Count: 2, Resolution: "restart_app", Severity: "warning", Meaning: "GPU memory page fault",
			Action: "restart the application; if it repeats with other applications, run GPU diagnostics",
		}},
		ECCSingle: 2,
	}, b0)

	// Hourly utilization per job (time-weighted over its GPUs' known time) and per node.
	nan := math.NaN()
	assertBuckets(t, map[string][]float64{
		"alice~train": {(80 + 100) / 2.0, (5 + 100) / 2.0, (50 + 0) / 2.0, 60 * 50.0 / (60 + 45)},
		"bob~infer":   {20, 20, 0, nan},
		"alice~eval":  {nan, nan, nan, 90},
	}, r.JobUtil)
	assertBuckets(t, map[string][]float64{
		"node-a": {90, 52.5, 25, 60 * 50.0 / (60 + 45)},
		"node-b": {30 * 20.0 / 60, 20, 0, 90},
	}, r.NodeUtil)
}

func assertUsages(t *testing.T, want, got []Usage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		assert.Equal(t, w.Name, g.Name)
		assert.Equal(t, w.Username, g.Username, w.Name)
		assert.Equal(t, w.VirtualCluster, g.VirtualCluster, w.Name)
		assert.Equal(t, w.GPUs, g.GPUs, w.Name)
		for _, f := range []struct {
			name      string
			want, got float64
		}{
			{"held", w.HeldHours, g.HeldHours},
			{"used", w.UsedHours, g.UsedHours},
			{"efficiency", w.Efficiency, g.Efficiency},
			{"idle", w.IdleHours, g.IdleHours},
			{"idle-held", w.IdleHeldHours, g.IdleHeldHours},
			{"unknown", w.UnknownHours, g.UnknownHours},
			{"peak", w.PeakUtil, g.PeakUtil},
			{"median", w.MedianUtil, g.MedianUtil},
		} {
			// Sums of the same terms in another order: equal up to float rounding.
			assert.InDelta(t, f.want, f.got, 1e-12, "%s %s", w.Name, f.name)
		}
	}
}

func assertBuckets(t *testing.T, want map[string][]float64, got []BucketSeries) {
	t.Helper()
	require.Len(t, got, len(want))
	for _, s := range got {
		w, ok := want[s.Name]
		require.True(t, ok, s.Name)
		require.Len(t, s.Values, len(w), s.Name)
		for i, v := range s.Values {
			if math.IsNaN(w[i]) {
				assert.True(t, math.IsNaN(float64(v)), "%s bucket %d: want no value, got %v", s.Name, i, v)
				continue
			}
			assert.InDelta(t, w[i], float64(v), 1e-12, "%s bucket %d", s.Name, i)
		}
	}
}
