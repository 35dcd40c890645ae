// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// Metric and label names of the contract (docs/metrics.md) that the report reads, beside the
// gpu receiver's (package gpunames). Its gpu_xid_errors_total carries the XID's resolution class
// (gpunames.KeyResolution) from the receiver's table as the site configured it; older agents
// lack it, and the report looks the code up in the shipped table.
const (
	metricTaskGPU       = "task_gpu_percent"
	metricTaskGPUMemory = "task_gpu_mem_percent"
	// GPM's activity per task (Hopper and newer GPUs): what its utilization was made of.
	metricTaskSM     = "task_gpu_sm_active_percent"
	metricTaskTensor = "task_gpu_tensor_active_percent"

	labelJob            = "job_name"
	labelUser           = "username"
	labelVirtualCluster = "virtual_cluster"
)

// Options are the report's period and thresholds.
type Options struct {
	Start, End time.Time
	// MaxGap is the longest interval between two samples that still counts as known time;
	// longer gaps are unknown time.
	MaxGap time.Duration
	// IdleBelow is the utilization (percent) below which a held GPU counts as idle.
	IdleBelow float64
	// IdleHeldUtilBelow and IdleHeldMemoryAtLeast define idle-held: utilization near zero while
	// the job keeps framebuffer memory allocated.
	IdleHeldUtilBelow     float64
	IdleHeldMemoryAtLeast float64
	// BusyAtLeast and LowSMBelow define busy but inefficient: mean utilization at least
	// BusyAtLeast while the mean SM activity (GPM) is below LowSMBelow, both percent.
	BusyAtLeast, LowSMBelow float64
	// Bucket is the resolution of the charts' time axes.
	Bucket time.Duration
	// Chunk bounds the time range of one query, NodesPerQuery the nodes it reads; together they
	// bound the memory a report needs.
	Chunk         time.Duration
	NodesPerQuery int
}

// Validate names the option at fault.
func (o Options) Validate() error {
	var errs []error
	if !o.Start.Before(o.End) {
		errs = append(errs, fmt.Errorf("start (%s) must be before end (%s)", o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339)))
	}
	if o.MaxGap <= 0 {
		errs = append(errs, errors.New("max-gap must be positive"))
	}
	if o.Bucket <= 0 || o.Chunk <= 0 {
		errs = append(errs, errors.New("bucket and chunk must be positive"))
	}
	if o.NodesPerQuery <= 0 {
		errs = append(errs, errors.New("nodes-per-query must be positive"))
	}
	if o.IdleBelow < 0 || o.IdleBelow > 100 || o.IdleHeldUtilBelow < 0 || o.IdleHeldUtilBelow > 100 || o.IdleHeldMemoryAtLeast < 0 || o.IdleHeldMemoryAtLeast > 100 {
		errs = append(errs, errors.New("idle thresholds are percentages between 0 and 100"))
	}
	if o.BusyAtLeast < 0 || o.BusyAtLeast > 100 || o.LowSMBelow < 0 || o.LowSMBelow > 100 {
		errs = append(errs, errors.New("busy-at-least and low-sm-active-below are percentages between 0 and 100"))
	}
	return errors.Join(errs...)
}

// Report is everything the report says, in hours and percent.
type Report struct {
	Start           time.Time  `json:"start"`
	End             time.Time  `json:"end"`
	Options         ReportOpts `json:"options"`
	Summary         Summary    `json:"summary"`
	Jobs            []Usage    `json:"jobs"`
	Users           []Usage    `json:"users"`
	VirtualClusters []Usage    `json:"virtual_clusters"`
	// SlurmAccounts are Slurm's accounts (slurm_job_info's), each with its users; none without
	// Slurm nodes.
	SlurmAccounts []Usage `json:"slurm_accounts,omitempty"`
	GPUs          []GPU   `json:"gpus"`
	// Charts' data: utilization per job and per node over time, in buckets from Start.
	BucketSeconds float64        `json:"bucket_seconds"`
	JobUtil       []BucketSeries `json:"job_utilization"`
	NodeUtil      []BucketSeries `json:"node_utilization"`
	// Warnings are the server's, such as a partial answer: the numbers may miss data.
	Warnings []string `json:"warnings,omitempty"`
	// Simulated is set when any series came from simulated GPUs (simulated="true").
	Simulated bool `json:"simulated"`
	// JobRecords are the records of the jobs that ended in the period (jobrecords.go), when
	// the report was given the job_record connector's file; Prices, when it was given prices.
	JobRecords []JobRecord `json:"job_records,omitempty"`
	Prices     *Prices     `json:"prices,omitempty"`
	// Fleet is the fleet's GPU health per week and node pool (fleet.go); empty without the
	// fleet-health rules' series.
	Fleet []FleetHealth `json:"fleet_health"`
}

// ReportOpts records the thresholds a report was computed with.
type ReportOpts struct {
	MaxGapSeconds         float64 `json:"max_gap_seconds"`
	IdleBelow             float64 `json:"idle_below_percent"`
	IdleHeldUtilBelow     float64 `json:"idle_held_utilization_below_percent"`
	IdleHeldMemoryAtLeast float64 `json:"idle_held_memory_at_least_percent"`
	BusyAtLeast           float64 `json:"busy_at_least_percent"`
	LowSMBelow            float64 `json:"low_sm_active_below_percent"`
}

// Summary is the cluster's week in a few numbers.
type Summary struct {
	// Jobs is every job together, named "all jobs".
	Jobs             Usage   `json:"jobs"`
	TaskSeries       int     `json:"task_gpu_series"`
	GPUs             int     `json:"gpus"`
	GPUUtilization   float64 `json:"gpu_utilization_percent"`
	UnavailableHours float64 `json:"gpu_hours_unavailable"`
	XIDs             float64 `json:"xids"`
	GPUsWithErrors   int     `json:"gpus_with_errors"`
}

// Usage is what one job, user or virtual cluster held and used.
type Usage struct {
	Name string `json:"name"`
	// Username and VirtualCluster are set on jobs.
	Username       string  `json:"username,omitempty"`
	VirtualCluster string  `json:"virtual_cluster,omitempty"`
	GPUs           int     `json:"gpus"`
	HeldHours      float64 `json:"gpu_hours_held"`
	UsedHours      float64 `json:"gpu_hours_used"`
	Efficiency     float64 `json:"efficiency"`
	IdleHours      float64 `json:"gpu_hours_idle"`
	IdleHeldHours  float64 `json:"gpu_hours_idle_held"`
	UnknownHours   float64 `json:"gpu_hours_unknown"`
	PeakUtil       float64 `json:"peak_utilization_percent"`
	MedianUtil     float64 `json:"median_utilization_percent"`
	// SMActive and TensorActive are the mean SM and tensor activity over the time GPM measured
	// them (Hopper and newer GPUs); null without GPM. BusyInefficient: busy (Efficiency at
	// least BusyAtLeast) with SMActive below LowSMBelow.
	SMActive        JSONNum `json:"sm_active_percent"`
	TensorActive    JSONNum `json:"tensor_active_percent"`
	BusyInefficient bool    `json:"busy_but_inefficient"`
}

// GPU is one GPU's availability and errors in the period.
type GPU struct {
	Node             string     `json:"node_name"`
	MinorNumber      string     `json:"minor_number"`
	UUID             string     `json:"uuid"`
	AvailableHours   float64    `json:"hours_available"`
	UnavailableHours float64    `json:"hours_unavailable"`
	UnknownHours     float64    `json:"hours_unknown"`
	XIDs             []XIDCount `json:"xids"`
	ECCSingle        float64    `json:"ecc_single_bit"`
	ECCDouble        float64    `json:"ecc_double_bit"`
	RetiredPages     float64    `json:"retired_pages"`
	RemappedRows     float64    `json:"remapped_rows"`
	RemapPending     bool       `json:"remap_pending"`
	RemapFailed      bool       `json:"remap_failed"`
}

// XIDCount is how often one XID code occurred on a GPU in the period, and what to do about it.
type XIDCount struct {
	Code  string  `json:"xid"`
	Count float64 `json:"count"`
	// Resolution is the class of what resolves it (none, restart_app, reset_gpu, reboot,
	// check_nvlink, unknown), Severity how bad it is (info, warning, fatal).
	Resolution string `json:"resolution"`
	Severity   string `json:"severity"`
	Meaning    string `json:"meaning"`
	Action     string `json:"action"`
}

// BucketSeries is a mean utilization per time bucket; NaN (null in JSON) where nothing is known.
type BucketSeries struct {
	Name   string    `json:"name"`
	Values []JSONNum `json:"values"`
}

// JSONNum is a float that encodes NaN as null.
type JSONNum float64

func (n JSONNum) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

func (n *JSONNum) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = JSONNum(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*n = JSONNum(f)
	return err
}

const msPerHour = float64(time.Hour / time.Millisecond)

// Build queries the API (a v1.API) and computes the report.
func Build(ctx context.Context, api querier, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f := fetcher{api: api, chunk: o.Chunk}
	from, to := o.Start.Add(-o.MaxGap), o.End.Add(o.MaxGap)
	nodes, warns, _, err := api.LabelValues(ctx, gpunames.KeyNodeName, []string{gpunames.GPUUp, gpunames.GPUUtilization, metricTaskGPU}, from, to)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	warnings := slices.Clone(warns)
	acc, fleet := newAccumulator(o), newFleetAcc(o)
	info, warns, err := f.raw(ctx, metricSlurmJobInfo, from, to)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, warns...)
	acc.slurm = newSlurmAccounts(info)
	// A few nodes at a time, so that memory holds one batch's raw samples, not the cluster's;
	// the first batch also takes series without a node name.
	batches := [][]string{{""}}
	for _, node := range nodes {
		if len(batches[len(batches)-1]) >= o.NodesPerQuery {
			batches = append(batches, nil)
		}
		batches[len(batches)-1] = append(batches[len(batches)-1], regexp.QuoteMeta(string(node)))
	}
	for _, batch := range batches {
		matcher := fmt.Sprintf("{%s=~%s}", gpunames.KeyNodeName, strconv.Quote(strings.Join(batch, "|")))
		var in inputs
		for _, q := range []struct {
			dst    *[]series
			metric string
		}{
			{&in.taskUtil, metricTaskGPU},
			{&in.taskMem, metricTaskGPUMemory},
			{&in.taskSM, metricTaskSM},
			{&in.taskTensor, metricTaskTensor},
			{&in.gpuUtil, gpunames.GPUUtilization},
			{&in.gpuUp, gpunames.GPUUp},
			{&in.xid, gpunames.GPUXIDErrorsTotal},
			{&in.ecc, gpunames.NvidiasmiECCErrorCount},
			{&in.retired, gpunames.NvidiasmiRetiredPageCount},
			{&in.remapped, gpunames.GPURemappedRows},
			{&in.remapPending, gpunames.GPURemappedRowsPending},
			{&in.remapFailed, gpunames.GPURemappedRowsFailed},
		} {
			s, warns, err := f.raw(ctx, q.metric+matcher, from, to)
			if err != nil {
				return nil, err
			}
			*q.dst = s
			warnings = append(warnings, warns...)
		}
		acc.add(in)
		fl, fleetWarns, fleetErr := fetchFleet(ctx, f, matcher, from, to)
		if fleetErr != nil {
			return nil, fleetErr
		}
		warnings = append(warnings, fleetWarns...)
		fleet.add(fl)
	}
	pools, poolWarns, poolErr := nodePools(ctx, api, o)
	if poolErr != nil {
		return nil, poolErr
	}
	warnings = append(warnings, poolWarns...)
	r := acc.report()
	r.Fleet = fleet.report(pools)
	r.Warnings = warnings
	return r, nil
}

// inputs are the raw series a report is computed from.
type inputs struct {
	taskUtil, taskMem, taskSM, taskTensor, gpuUtil, gpuUp, xid, ecc, retired, remapped, remapPending, remapFailed []series
}

// usageAcc sums one group's task series.
type usageAcc struct {
	gpus           map[string]bool
	heldMs, unkMs  int64
	usedMsPct      float64 // Σ duration × utilization
	idleMs, ihMs   int64
	peak           float64
	timeAt         timeAtValue
	usernames, vcs map[string]bool
	// sm and tensor are GPM's activity, over the time it measured.
	sm, tensor activityAcc
}

// activityAcc is a percent integrated over the time it was known.
type activityAcc struct {
	ms    int64
	msPct float64
}

func (a *activityAcc) add(segs []segment) {
	for _, seg := range segs {
		a.ms += seg.duration()
		a.msPct += float64(seg.duration()) * seg.v
	}
}

// mean is the time-weighted mean, NaN when never measured.
func (a activityAcc) mean() JSONNum {
	if a.ms == 0 {
		return JSONNum(math.NaN())
	}
	return JSONNum(a.msPct / float64(a.ms))
}

func (a *usageAcc) usage(name string, o Options) Usage {
	u := a.usageOf(name)
	u.SMActive, u.TensorActive = a.sm.mean(), a.tensor.mean()
	u.BusyInefficient = a.sm.ms > 0 && u.Efficiency*100 >= o.BusyAtLeast && float64(u.SMActive) < o.LowSMBelow
	return u
}

func (a *usageAcc) usageOf(name string) Usage {
	return Usage{
		Name:          name,
		GPUs:          len(a.gpus),
		HeldHours:     float64(a.heldMs) / msPerHour,
		UsedHours:     a.usedMsPct / 100 / msPerHour,
		Efficiency:    a.usedMsPct / 100 / float64(a.heldMs),
		IdleHours:     float64(a.idleMs) / msPerHour,
		IdleHeldHours: float64(a.ihMs) / msPerHour,
		UnknownHours:  float64(a.unkMs) / msPerHour,
		PeakUtil:      a.peak,
		MedianUtil:    a.timeAt.median(),
	}
}

func gpuKey(l model.Metric) string {
	return string(l[gpunames.KeyNodeName]) + "\x00" + string(l[gpunames.KeyMinorNumber]) + "\x00" + string(l[gpunames.KeyUUID])
}

// accumulator sums batches of inputs into one report.
type accumulator struct {
	o                       Options
	w                       window
	maxGap                  int64
	groups                  map[string]map[string]*usageAcc // by grouping label, then its value
	total                   *usageAcc
	taskSeries              int
	jobBuckets, nodeBuckets *bucketed
	utilMsPct               float64 // Σ duration × gpu_utilization
	utilMs                  int64
	gpus                    []GPU
	simulated               bool
	slurm                   slurmAccounts
}

func newAccumulator(o Options) *accumulator {
	w := window{o.Start.UnixMilli(), o.End.UnixMilli()}
	return &accumulator{
		o: o, w: w, maxGap: o.MaxGap.Milliseconds(),
		groups: map[string]map[string]*usageAcc{labelJob: {}, labelUser: {}, labelVirtualCluster: {}, labelSlurmAccount: {}},
		total:  newUsageAcc(), jobBuckets: newBucketed(w, o.Bucket), nodeBuckets: newBucketed(w, o.Bucket),
	}
}

// compute is the report of one set of inputs, with the Slurm jobs' slurm_job_info series.
func compute(in inputs, o Options, slurmInfo ...series) *Report {
	a := newAccumulator(o)
	a.slurm = newSlurmAccounts(slurmInfo)
	a.add(in)
	return a.report()
}

// add takes in the series of some nodes: each GPU, and each task series, is in one batch only.
func (a *accumulator) add(in inputs) {
	o, w, maxGap := a.o, a.w, a.maxGap
	a.slurm.label(in.taskUtil, in.taskMem, in.taskSM, in.taskTensor)
	memBySeries := map[model.Fingerprint][]segment{}
	for _, s := range in.taskMem {
		memBySeries[s.labels.Fingerprint()] = stepTimeline(s.samples, w, maxGap).segments
	}
	for _, s := range in.taskUtil {
		tl := stepTimeline(s.samples, w, maxGap)
		if len(tl.segments) == 0 && tl.unknownMs == 0 {
			continue
		}
		a.taskSeries++
		one := usageAcc{unkMs: tl.unknownMs, timeAt: timeAtValue{}}
		one.timeAt.add(tl.segments)
		for _, seg := range tl.segments {
			d := seg.duration()
			one.heldMs += d
			one.usedMsPct += float64(d) * seg.v
			if seg.v < o.IdleBelow {
				one.idleMs += d
			}
			one.peak = max(one.peak, seg.v)
		}
		intersect(tl.segments, memBySeries[s.labels.Fingerprint()], func(start, end int64, util, mem float64) {
			if util < o.IdleHeldUtilBelow && mem >= o.IdleHeldMemoryAtLeast {
				one.ihMs += end - start
			}
		})
		for _, acc := range append(groupAccs(a.groups, s.labels), a.total) {
			acc.add(&one, s.labels)
		}
		a.jobBuckets.add(string(s.labels[labelJob]), tl.segments)
	}
	// GPM's activity, to the groups whose utilization is known: a task on a MIG slice has no
	// utilization, and no row to add it to.
	for _, act := range []struct {
		series []series
		of     func(*usageAcc) *activityAcc
	}{
		{in.taskSM, func(u *usageAcc) *activityAcc { return &u.sm }},
		{in.taskTensor, func(u *usageAcc) *activityAcc { return &u.tensor }},
	} {
		for _, s := range act.series {
			if a.groups[labelJob][string(s.labels[labelJob])] == nil {
				continue
			}
			accs := existingGroupAccs(a.groups, s.labels)
			segs := stepTimeline(s.samples, w, maxGap).segments
			for _, acc := range append(accs, a.total) {
				act.of(acc).add(segs)
			}
		}
	}
	for _, s := range in.gpuUtil {
		tl := stepTimeline(s.samples, w, maxGap)
		a.nodeBuckets.add(string(s.labels[gpunames.KeyNodeName]), tl.segments)
		for _, seg := range tl.segments {
			a.utilMsPct += float64(seg.duration()) * seg.v
			a.utilMs += seg.duration()
		}
	}
	a.gpus = append(a.gpus, gpus(in, w, maxGap)...)
	for _, s := range slices.Concat(in.gpuUp, in.taskUtil) {
		a.simulated = a.simulated || s.labels[gpunames.KeySimulated] == "true"
	}
}

func (a *accumulator) report() *Report {
	o := a.o
	r := &Report{
		Start: o.Start.UTC(), End: o.End.UTC(),
		Options: ReportOpts{
			MaxGapSeconds: o.MaxGap.Seconds(), IdleBelow: o.IdleBelow,
			IdleHeldUtilBelow: o.IdleHeldUtilBelow, IdleHeldMemoryAtLeast: o.IdleHeldMemoryAtLeast,
			BusyAtLeast: o.BusyAtLeast, LowSMBelow: o.LowSMBelow,
		},
		BucketSeconds:   o.Bucket.Seconds(),
		Jobs:            usages(a.groups[labelJob], true, o),
		Users:           usages(a.groups[labelUser], false, o),
		VirtualClusters: usages(a.groups[labelVirtualCluster], false, o),
		SlurmAccounts:   withUsers(usages(a.groups[labelSlurmAccount], false, o), a.groups[labelSlurmAccount]),
		GPUs:            a.gpus,
		Simulated:       a.simulated,
	}
	r.Summary.TaskSeries = a.taskSeries
	r.Summary.Jobs = Usage{Name: "all jobs", SMActive: JSONNum(math.NaN()), TensorActive: JSONNum(math.NaN())}
	if a.total.heldMs > 0 {
		r.Summary.Jobs = a.total.usage("all jobs", o)
	}
	for i := range r.Jobs {
		r.JobUtil = append(r.JobUtil, a.jobBuckets.series(r.Jobs[i].Name))
	}
	if a.utilMs > 0 {
		r.Summary.GPUUtilization = a.utilMsPct / float64(a.utilMs)
	}
	for _, node := range sortedKeys(a.nodeBuckets.sum) {
		r.NodeUtil = append(r.NodeUtil, a.nodeBuckets.series(node))
	}
	sort.SliceStable(r.GPUs, func(i, j int) bool { return gpuLess(r.GPUs[i], r.GPUs[j]) })
	r.Summary.GPUs = len(r.GPUs)
	for i := range r.GPUs {
		g := &r.GPUs[i]
		r.Summary.UnavailableHours += g.UnavailableHours
		errs := g.ECCDouble + g.RemappedRows + g.RetiredPages
		for _, x := range g.XIDs {
			r.Summary.XIDs += x.Count
			errs += x.Count
		}
		if errs > 0 || g.RemapFailed || g.RemapPending {
			r.Summary.GPUsWithErrors++
		}
	}
	return r
}

func groupAccs(groups map[string]map[string]*usageAcc, labels model.Metric) []*usageAcc {
	out := make([]*usageAcc, 0, len(groups)+1)
	for label, byName := range groups {
		if !inGroup(label, labels) {
			continue
		}
		name := string(labels[model.LabelName(label)])
		acc := byName[name]
		if acc == nil {
			acc = newUsageAcc()
			byName[name] = acc
		}
		out = append(out, acc)
	}
	return out
}

// existingGroupAccs are the groups of labels that already have an accumulator.
func existingGroupAccs(groups map[string]map[string]*usageAcc, labels model.Metric) []*usageAcc {
	var out []*usageAcc
	for label, byName := range groups {
		if !inGroup(label, labels) {
			continue
		}
		if acc := byName[string(labels[model.LabelName(label)])]; acc != nil {
			out = append(out, acc)
		}
	}
	return out
}

func newUsageAcc() *usageAcc {
	return &usageAcc{gpus: map[string]bool{}, usernames: map[string]bool{}, vcs: map[string]bool{}, timeAt: timeAtValue{}}
}

func (a *usageAcc) add(one *usageAcc, labels model.Metric) {
	a.gpus[gpuKey(labels)] = true
	a.usernames[string(labels[labelUser])] = true
	a.vcs[string(labels[labelVirtualCluster])] = true
	a.heldMs += one.heldMs
	a.unkMs += one.unkMs
	a.usedMsPct += one.usedMsPct
	a.idleMs += one.idleMs
	a.ihMs += one.ihMs
	a.peak = max(a.peak, one.peak)
	a.sm.ms, a.sm.msPct = a.sm.ms+one.sm.ms, a.sm.msPct+one.sm.msPct
	a.tensor.ms, a.tensor.msPct = a.tensor.ms+one.tensor.ms, a.tensor.msPct+one.tensor.msPct
	for v, ms := range one.timeAt {
		a.timeAt[v] += ms
	}
}

// usages lists groups by GPU-hours held, most first; groups with no known time are left out.
func usages(byName map[string]*usageAcc, job bool, o Options) []Usage {
	var out []Usage
	for name, acc := range byName {
		if acc.heldMs == 0 {
			continue
		}
		u := acc.usage(name, o)
		if job {
			u.Username, u.VirtualCluster = joinKeys(acc.usernames), joinKeys(acc.vcs)
		}
		out = append(out, u)
	}
	sortUsages(out, func(u Usage) float64 { return u.HeldHours })
	return out
}

// sortUsages orders rows by key, largest first, then by name.
func sortUsages(rows []Usage, key func(Usage) float64) {
	sort.Slice(rows, func(i, j int) bool {
		if ki, kj := key(rows[i]), key(rows[j]); ki != kj {
			return ki > kj
		}
		return rows[i].Name < rows[j].Name
	})
}

func gpus(in inputs, w window, maxGap int64) []GPU {
	byKey := map[string]*GPU{}
	get := func(l model.Metric) *GPU {
		k := gpuKey(l)
		g := byKey[k]
		if g == nil {
			g = &GPU{Node: string(l[gpunames.KeyNodeName]), MinorNumber: string(l[gpunames.KeyMinorNumber]), UUID: string(l[gpunames.KeyUUID]), XIDs: []XIDCount{}}
			byKey[k] = g
		}
		return g
	}
	for _, s := range in.gpuUp {
		var upMs, downMs int64
		tl := stepTimeline(s.samples, w, maxGap)
		for _, seg := range tl.segments {
			if seg.v == 0 {
				downMs += seg.duration()
			} else {
				upMs += seg.duration()
			}
		}
		g := get(s.labels)
		g.AvailableHours += float64(upMs) / msPerHour
		g.UnavailableHours += float64(downMs) / msPerHour
		g.UnknownHours += float64(tl.unknownMs) / msPerHour
	}
	for _, s := range in.xid {
		n := counterIncrease(s.samples, w)
		if n == 0 {
			continue
		}
		g := get(s.labels)
		code := string(s.labels[gpunames.KeyXID])
		c, _ := strconv.ParseUint(code, 10, 32)
		info := xid.Lookup(c)
		action := info.ActionText()
		if class := xid.Resolution(s.labels[gpunames.KeyResolution]); class != "" && class != info.Resolution {
			// The site reclassified the code: say what its class calls for.
			info.Resolution = class
			if a := class.Action(); a != "" {
				action = a
			}
		}
		// One row per code and class, also when several series carry them (an agent that moved).
		if i := slices.IndexFunc(g.XIDs, func(x XIDCount) bool { return x.Code == code && x.Resolution == string(info.Resolution) }); i >= 0 {
			g.XIDs[i].Count += n
			continue
		}
		g.XIDs = append(g.XIDs, XIDCount{Code: code, Count: n, Resolution: string(info.Resolution), Severity: string(info.Severity), Meaning: info.Meaning, Action: action})
	}
	for _, s := range in.ecc {
		n := counterIncrease(s.samples, w)
		switch s.labels[gpunames.KeyType] {
		case "single":
			get(s.labels).ECCSingle += n
		case "double":
			get(s.labels).ECCDouble += n
		}
	}
	for _, s := range in.retired {
		get(s.labels).RetiredPages += counterIncrease(s.samples, w)
	}
	for _, s := range in.remapped {
		get(s.labels).RemappedRows += counterIncrease(s.samples, w)
	}
	for _, flag := range []struct {
		in  []series
		set func(*GPU)
	}{
		{in.remapPending, func(g *GPU) { g.RemapPending = true }},
		{in.remapFailed, func(g *GPU) { g.RemapFailed = true }},
	} {
		for _, s := range flag.in {
			for _, seg := range stepTimeline(s.samples, w, maxGap).segments {
				if seg.v > 0 {
					flag.set(get(s.labels))
					break
				}
			}
		}
	}
	out := make([]GPU, 0, len(byKey))
	for _, g := range byKey {
		sort.Slice(g.XIDs, func(i, j int) bool { return xidLess(g.XIDs[i].Code, g.XIDs[j].Code) })
		out = append(out, *g)
	}
	return out
}

// gpuLess orders GPUs by node, then by index.
func gpuLess(a, b GPU) bool {
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return xidLess(a.MinorNumber, b.MinorNumber)
}

// xidLess orders numeric strings by number, others after them by text.
func xidLess(a, b string) bool {
	na, ea := strconv.Atoi(a)
	nb, eb := strconv.Atoi(b)
	if ea == nil && eb == nil {
		return na < nb
	}
	return a < b
}

// bucketed sums segments per name (a job, a node) into the charts' time buckets.
type bucketed struct {
	start, width int64
	n            int
	sum, known   map[string][]float64
}

func newBucketed(w window, bucket time.Duration) *bucketed {
	width := bucket.Milliseconds()
	return &bucketed{
		start: w.start, width: width, n: int((w.end - w.start + width - 1) / width),
		sum: map[string][]float64{}, known: map[string][]float64{},
	}
}

func (b *bucketed) add(name string, segments []segment) {
	if b.sum[name] == nil {
		b.sum[name], b.known[name] = make([]float64, b.n), make([]float64, b.n)
	}
	bucketAverages(segments, b.start, b.width, b.n, b.sum[name], b.known[name])
}

// series is the name's time-weighted mean per bucket, NaN where nothing is known.
func (b *bucketed) series(name string) BucketSeries {
	sum, known := b.sum[name], b.known[name]
	out := BucketSeries{Name: name, Values: make([]JSONNum, len(sum))}
	for i := range sum {
		out.Values[i] = JSONNum(math.NaN())
		if known[i] > 0 {
			out.Values[i] = JSONNum(sum[i] / known[i])
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinKeys(set map[string]bool) string {
	keys := sortedKeys(set)
	var out strings.Builder
	for i, k := range keys {
		if i > 0 {
			out.WriteString(",")
		}
		out.WriteString(k)
	}
	return out.String()
}
