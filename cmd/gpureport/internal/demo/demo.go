// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package demo generates a week of a small GPU cluster as Prometheus would have scraped it
// from otelcol-gpu's agents with simulated GPUs (every series simulated="true"): jobs that train, serve, sweep and sit idle in notebooks, and the
// faults an operator has to act on (a GPU off the bus, XIDs, ECC errors, an agent down), on
// Kubernetes nodes and on a Slurm node (slurm.go).
package demo // import "github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/demo"

import (
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/fixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// ScrapeInterval of the demo cluster; two minutes keeps a week of it small.
const ScrapeInterval = 2 * time.Minute

// profile is how a job uses its GPUs.
type profile int

const (
	training profile = iota // busy, 70–95 %
	serving                 // follows the day: busy in working hours, low at night
	sweep                   // bursts of work between pauses
	notebook                // mostly idle with the model loaded: idle-held
	stalled                 // allocated, nothing runs, nothing loaded
)

type jobKind struct {
	name    string
	profile profile
	// sm and tensor are the fractions of its utilization that GPM sees as SM and tensor-pipe
	// activity, on the Hopper node: resnet50's small kernels keep the GPUs busy with few SMs
	// working (busy but inefficient), the large models' keep the tensor cores busy.
	sm, tensor float64
}

var kinds = []jobKind{
	{"resnet50", training, 0.25, 0.03},
	{"bert-large", training, 0.9, 0.7},
	{"llama-ft", training, 0.92, 0.75},
	{"diffusion", training, 0.8, 0.5},
	{"infer-api", serving, 0.6, 0.4},
	{"hparam-sweep", sweep, 0.7, 0.3},
	{"notebook", notebook, 0.5, 0.2},
	{"eval-harness", sweep, 0.4, 0.1},
	{"data-prep", stalled, 0, 0},
}

var users = []struct{ name, vc string }{
	{"alice", "prod"},
	{"bob", "research"},
	{"carol", "research"},
	{"dave", "default"},
	{"erin", "prod"},
	{"frank", "default"},
}

// node is one demo node: its GPUs split into groups, each group running one job at a time;
// hopper ones have GPM (SM and tensor activity per task).
type node struct {
	name, instance string
	groups         []int
	hopper         bool
}

// kubeNodes run Kubernetes; the Slurm pool (slurm.go) comes after them, so that their
// schedule, identities and faults are what they were without it.
var kubeNodes = []node{
	{"gpu-node-01", "10.0.0.11:9102", []int{4}, false},
	{"gpu-node-02", "10.0.0.12:9102", []int{2, 2}, false},
	{"gpu-node-03", "10.0.0.13:9102", []int{2, 1, 1}, false},
	{"gpu-node-04", "10.0.0.14:9102", []int{1, 1, 1, 1}, false},
	{"gpu-node-05", "10.0.0.15:9102", []int{4}, true},
}

var nodes = append(slices.Clip(kubeNodes), slurmNodes...)

// gpuRef is one GPU of the demo: node and GPU index, and its labels.
type gpuRef struct {
	n, g int
	gpu  fixture.GPU
}

// allocation is one job's task holding some GPUs in [from, to).
type allocation struct {
	task     fixture.Task
	gpus     []int
	from, to time.Time
	profile  profile
	kind     jobKind
	slurm    *slurmJob // on a Slurm node: the job, whose labels replace the task's
}

// Faults of the week, offsets from its start.
var (
	offBus       = struct{ node, gpu int }{2, 3} // XID 79, gpu_up 0 for 3 h on day 4
	offBusAt     = 3*24*time.Hour + 10*time.Hour
	offBusFor    = 3 * time.Hour
	agentDown    = 3 // gpu-node-04's agent is down for 2 h on day 6
	agentDownAt  = 5*24*time.Hour + 14*time.Hour
	agentDownFor = 2 * time.Hour
)

// Span is the time the data of the week [end-7d, end) covers: an hour of history on both sides.
func Span(end time.Time) (from, to time.Time) {
	return end.Add(-7*24*time.Hour - time.Hour), end.Add(time.Hour)
}

// Write writes the week [end-7d, end) with some history on both sides (Span) as OpenMetrics.
func Write(w io.Writer, end time.Time) error {
	start := end.Add(-7 * 24 * time.Hour)
	from, to := Span(end)
	rng := rand.New(rand.NewPCG(1, 2))
	allocs := schedule(rng, from, to)

	om := fixture.NewWriter(w)
	wk := week{start: start, from: from, to: to}
	lost, gauge := wk.lost, wk.gauge
	var gpus []gpuRef
	gpuOf := map[[2]int]fixture.GPU{}
	for n, nd := range nodes {
		count := 0
		for _, k := range nd.groups {
			count += k
		}
		for g := range count {
			gpu := fixture.GPU{
				Node: nd.name, Instance: nd.instance, Minor: g,
				UUID:      fmt.Sprintf("GPU-%08x-%04x-4%03x-8%03x-%012x", 0x5eed0000+n, g, n, g, n*16+g),
				Simulated: true,
			}
			gpus = append(gpus, gpuRef{n, g, gpu})
			gpuOf[[2]int{n, g}] = gpu
		}
	}
	util := func(a allocation, g int, t time.Time) float64 {
		return utilization(a.profile, g, t)
	}
	holder := func(n, g int, t time.Time) (allocation, bool) {
		for i := range allocs[n] {
			a := &allocs[n][i]
			for _, ag := range a.gpus {
				if ag == g && !t.Before(a.from) && t.Before(a.to) {
					return *a, true
				}
			}
		}
		return allocation{}, false
	}

	om.Gauge("task_gpu_percent", "Utilization of each GPU allocated to the task.")
	for n := range nodes {
		for i := range allocs[n] {
			a := &allocs[n][i]
			for _, g := range a.gpus {
				om.Series(a.labels(gpuOf[[2]int{n, g}]), gauge(n, func(t time.Time) (float64, bool) {
					return util(*a, g, t), !t.Before(a.from) && t.Before(a.to) && !lost(n, g, t)
				}))
			}
		}
	}
	om.Gauge("task_gpu_mem_percent", "Framebuffer used/total of each GPU allocated to the task.")
	for n := range nodes {
		for i := range allocs[n] {
			a := &allocs[n][i]
			for _, g := range a.gpus {
				om.Series(a.labels(gpuOf[[2]int{n, g}]), gauge(n, func(t time.Time) (float64, bool) {
					return memory(a.profile, t.Sub(a.from)), !t.Before(a.from) && t.Before(a.to) && !lost(n, g, t)
				}))
			}
		}
	}
	// GPM's activity of the tasks on the Hopper node, a fraction of their utilization.
	for _, m := range []struct {
		name, help string
		of         func(jobKind) float64
	}{
		{"task_gpu_sm_active_percent", "SM activity (GPM) of each GPU allocated to the task.", func(k jobKind) float64 { return k.sm }},
		{"task_gpu_tensor_active_percent", "Tensor pipe activity (GPM) of each GPU allocated to the task.", func(k jobKind) float64 { return k.tensor }},
	} {
		om.Gauge(m.name, m.help)
		for n := range nodes {
			if !nodes[n].hopper {
				continue
			}
			for i := range allocs[n] {
				a := &allocs[n][i]
				for _, g := range a.gpus {
					om.Series(a.labels(gpuOf[[2]int{n, g}]), gauge(n, func(t time.Time) (float64, bool) {
						return math.Round(util(*a, g, t)*m.of(a.kind)*10) / 10, !t.Before(a.from) && t.Before(a.to) && !lost(n, g, t)
					}))
				}
			}
		}
	}
	writeSlurmJobInfo(om, allocs, gauge)
	present := func(r gpuRef, v func(t time.Time) float64) iter.Seq2[int64, float64] {
		return gauge(r.n, func(t time.Time) (float64, bool) { return v(t), !lost(r.n, r.g, t) })
	}
	om.Gauge("gpu_utilization", "Percent of time over NVML's sample period during which a kernel ran on the GPU.")
	for _, r := range gpus {
		om.Series(r.gpu.Labels().With("vender", "nvidia"), present(r, func(t time.Time) float64 {
			if a, ok := holder(r.n, r.g, t); ok {
				return util(a, r.g, t)
			}
			return 0
		}))
	}
	om.Gauge("gpu_up", "1 while the GPU answers NVML.")
	for _, r := range gpus {
		om.Series(r.gpu.Labels(), gauge(r.n, func(t time.Time) (float64, bool) {
			if lost(r.n, r.g, t) {
				return 0, true
			}
			return 1, true
		}))
	}
	om.Counter("gpu_xid_errors_total", "XID errors per GPU and code since the receiver started.")
	for _, x := range []struct {
		n, g  int
		xid   string
		times []time.Duration
	}{
		{offBus.node, offBus.gpu, "79", []time.Duration{offBusAt}},
		{1, 0, "13", []time.Duration{30 * time.Hour, 31 * time.Hour, 100 * time.Hour}},
		{4, 2, "31", []time.Duration{50 * time.Hour}},
		{0, 1, "94", []time.Duration{140 * time.Hour}},
	} {
		code, _ := strconv.ParseUint(x.xid, 10, 32)
		resolution := string(xid.Lookup(code).Resolution)
		om.Series(gpuOf[[2]int{x.n, x.g}].Labels().With("xid", x.xid, "resolution", resolution), gauge(x.n, func(t time.Time) (float64, bool) {
			count := 0
			for _, at := range x.times {
				if !t.Before(start.Add(at)) {
					count++
				}
			}
			return float64(count), count > 0
		}))
	}
	om.Gauge("nvidiasmi_ecc_error_count", "Volatile ECC errors, single (corrected) and double (uncorrected) bit.")
	for _, r := range gpus {
		for _, typ := range []string{"single", "double"} {
			om.Series(r.gpu.Labels().With("type", typ), present(r, func(t time.Time) float64 {
				switch {
				case typ == "single" && r.n == 4 && r.g == 2:
					return math.Floor(math.Max(0, t.Sub(start).Hours()-40) / 12) // a slow leak of corrected errors
				case typ == "double" && r.n == offBus.node && r.g == offBus.gpu && !t.Before(start.Add(offBusAt-time.Hour)):
					return 1
				}
				return 0
			}))
		}
	}
	om.Gauge("gpu_remapped_rows", "Memory rows remapped after errors.")
	for _, r := range gpus {
		for _, typ := range []string{"corrected", "uncorrected"} {
			om.Series(r.gpu.Labels().With("error_type", typ), present(r, func(t time.Time) float64 {
				if typ == "uncorrected" && r.n == offBus.node && r.g == offBus.gpu && !t.Before(start.Add(offBusAt-time.Hour)) {
					return 1
				}
				return 0
			}))
		}
	}
	for _, m := range []string{"gpu_remapped_rows_pending", "gpu_remapped_rows_failed"} {
		om.Gauge(m, "Row remapping state of the GPU.")
		for _, r := range gpus {
			om.Series(r.gpu.Labels(), present(r, func(t time.Time) float64 {
				if m == "gpu_remapped_rows_pending" && r.n == offBus.node && r.g == offBus.gpu && !t.Before(start.Add(offBusAt-time.Hour)) {
					return 1
				}
				return 0
			}))
		}
	}
	writeGPUInfo(om, wk, gpus)
	writeHealthReadings(om, wk, gpus)
	writeHealthWriter(om, wk)
	return om.Close()
}

// week is the demo's week from start and the scrapes of it, from before it to after it.
type week struct{ start, from, to time.Time }

// scrapes are the times node n's agent was scraped: all but while it was down.
func (wk week) scrapes(n int) iter.Seq[time.Time] {
	return func(yield func(time.Time) bool) {
		for t := wk.from.Truncate(ScrapeInterval); t.Before(wk.to); t = t.Add(ScrapeInterval) {
			d := t.Sub(wk.start)
			if n == agentDown && d >= agentDownAt && d < agentDownAt+agentDownFor {
				continue
			}
			if !yield(t) {
				return
			}
		}
	}
}

// lost says whether GPU g of node n was off the bus at t.
func (wk week) lost(n, g int, t time.Time) bool {
	d := t.Sub(wk.start)
	return n == offBus.node && g == offBus.gpu && d >= offBusAt && d < offBusAt+offBusFor
}

// gauge is a series of node n's agent: v's value at each scrape where it says the series exists.
func (wk week) gauge(n int, v func(t time.Time) (float64, bool)) iter.Seq2[int64, float64] {
	return func(yield func(int64, float64) bool) {
		for t := range wk.scrapes(n) {
			if x, ok := v(t); ok && !yield(t.UnixMilli(), x) {
				return
			}
		}
	}
}

// schedule fills every GPU group of every node with jobs, back to back with idle gaps.
func schedule(rng *rand.Rand, from, to time.Time) [][]allocation {
	out := make([][]allocation, len(nodes))
	jobs := 0
	for n, nd := range nodes {
		first := 0
		for _, width := range nd.groups {
			gpus := make([]int, width)
			for i := range gpus {
				gpus[i] = first + i
			}
			first += width
			t := from.Add(time.Duration(rng.IntN(6*60)) * time.Minute)
			for t.Before(to) {
				kind := kinds[rng.IntN(len(kinds))]
				user := users[rng.IntN(len(users))]
				d := time.Duration(4+rng.IntN(44)) * time.Hour
				jobs++
				name := fmt.Sprintf("%s~%s-%d", user.name, kind.name, jobs)
				out[n] = append(out[n], allocation{
					task: fixture.Task{
						Username: user.name, JobName: name, RoleName: "worker", TaskIndex: "0",
						JobInstanceID:  fmt.Sprintf("0_%08x-0000-4000-8000-%012x", jobs, jobs),
						VirtualCluster: user.vc, Namespace: "default", PodName: fmt.Sprintf("%s-worker-0", name[len(user.name)+1:]),
						ContainerName: "main", ContainerID: fmt.Sprintf("%064x", jobs),
					},
					gpus: gpus, from: t, to: t.Add(d), profile: kind.profile, kind: kind,
					slurm: newSlurmJob(n, jobs, user.name, kind),
				})
				t = t.Add(d + time.Duration(rng.IntN(8*60))*time.Minute)
			}
		}
	}
	return out
}

// noise is a deterministic value in [0, 1) per GPU and time.
func noise(g int, t time.Time) float64 {
	x := uint64(t.Unix())*0x9e3779b97f4a7c15 + uint64(g+1)*0xbf58476d1ce4e5b9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return float64(x>>11) / float64(1<<53)
}

func utilization(p profile, g int, t time.Time) float64 {
	r := noise(g, t)
	switch p {
	case training:
		return math.Round(70 + 25*r)
	case serving:
		hour := float64(t.Hour()) + float64(t.Minute())/60
		day := math.Max(0, math.Sin((hour-6)/24*2*math.Pi))
		return math.Round(5 + 60*day + 10*r)
	case sweep:
		if (t.Unix()/3600)%3 == 0 {
			return math.Round(2 * r)
		}
		return math.Round(50 + 40*r)
	case notebook:
		if r > 0.97 {
			return math.Round(30 + 40*r)
		}
		return 0
	}
	return 0
}

func memory(p profile, held time.Duration) float64 {
	switch p {
	case stalled:
		return 0
	case notebook:
		return 35
	}
	return math.Min(85, 40+held.Hours())
}
