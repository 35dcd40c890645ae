// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector"

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// The series the totals are made of (docs/metrics.md): the attribution's per task and GPU,
// and the GPUs' own, joined to a task by node_name and uuid.
const (
	metricTaskMem      = "task_gpu_mem_percent" // every GPU or slice a task holds: the clock of held time
	metricTaskUtil     = "task_gpu_percent"
	metricTaskSMActive = "task_gpu_sm_active_percent"
)

// totals is every running job's totals and what they need of each GPU's own series: all of
// the connector's state, and what its checkpoint holds (as JSON).
type totals struct {
	// GPUs by gpuKey.
	GPUs map[string]*gpuFacts `json:"gpus"`
	// Jobs by jobKey.
	Jobs map[string]*job `json:"jobs"`
}

// gpuFacts is a GPU's latest collection of its own series.
type gpuFacts struct {
	Model     string             `json:"model,omitempty"`
	Energy    *float64           `json:"energy,omitempty"`
	Throttled map[string]bool    `json:"throttled,omitempty"` // active reasons
	XIDs      map[string]counter `json:"xids,omitempty"`      // by code
	ECC       map[string]counter `json:"ecc,omitempty"`       // volatile count by type
	MIGMemory map[string]float64 `json:"mig_memory,omitempty"`
	// Seen is when the connector last received one of the GPU's series (its clock).
	Seen time.Time `json:"seen"`
}

type job struct {
	Job   map[string]string `json:"job"`
	User  string            `json:"user"`
	Start int64             `json:"start"` // unix ns of the first sample
	End   int64             `json:"end"`   // and of the last
	// LastSeen is when the connector last received one of the job's series (its clock):
	// what end_after counts from.
	LastSeen time.Time `json:"last_seen"`
	// GPUs by the node, uuid and mig_uuid of each GPU or slice.
	GPUs map[string]*jobGPU `json:"gpus"`
}

// jobGPU is one GPU or MIG slice of a job: its totals so far, in seconds where not said, and
// the sample that the next one continues from.
type jobGPU struct {
	NodeName    string `json:"node_name"`
	UUID        string `json:"uuid"`
	MinorNumber string `json:"minor_number"`
	MIGUUID     string `json:"mig_uuid,omitempty"`

	LastT int64 `json:"last_t"`
	// The GPU's counters at LastT, from which the next interval's increase counts.
	Energy *float64           `json:"energy,omitempty"`
	XIDs   map[string]counter `json:"xids,omitempty"`
	ECC    map[string]counter `json:"ecc,omitempty"`

	Held      float64            `json:"held"`
	Allocated float64            `json:"allocated"`
	UtilTime  float64            `json:"util_time"` // held time with a utilization
	UtilSum   float64            `json:"util_sum"`  // ∫ utilization/100 dt
	UtilPeak  float64            `json:"util_peak"`
	MemTime   float64            `json:"mem_time"`
	MemSum    float64            `json:"mem_sum"` // ∫ memory% dt
	MemPeak   float64            `json:"mem_peak"`
	SMTime    float64            `json:"sm_time"`
	SMSum     float64            `json:"sm_sum"` // ∫ SM activity/100 dt
	Joules    float64            `json:"joules"`
	Throttled float64            `json:"throttled"`
	ByReason  map[string]float64 `json:"by_reason,omitempty"`
	XIDCount  map[string]int64   `json:"xid_count,omitempty"`
	ECCSingle int64              `json:"ecc_single"`
	ECCDouble int64              `json:"ecc_double"`
	Unknown   float64            `json:"unknown"`
}

// counter is a counter's value and its start time: a new start time is a new series (the
// agent restarted), which counts from zero.
type counter struct {
	V     float64 `json:"v"`
	Start int64   `json:"start,omitempty"`
}

func newTotals() *totals {
	return &totals{GPUs: map[string]*gpuFacts{}, Jobs: map[string]*job{}}
}

func gpuKey(node, uuid string) string { return node + "/" + uuid }

// labels looks a label up on a data point, then on its resource.
type labels struct{ dp, res pcommon.Map }

func (l labels) get(key string) (string, bool) {
	if v, ok := l.dp.Get(key); ok {
		return v.AsString(), true
	}
	if v, ok := l.res.Get(key); ok {
		return v.AsString(), true
	}
	return "", false
}

// taskSample is one task's collection of one GPU or slice.
type taskSample struct {
	labels
	t             int64
	mem           float64
	util, sm      *float64
	haveMem       bool
	node, uuid    string
	minor, mig    string
	jobKey, gpuID string
}

// consume adds a batch: first the GPUs' own series, so that the tasks' intervals ending in
// this batch see the GPUs' counters of the same collection, then the tasks' samples.
func (c *recorder) consume(md pmetric.Metrics, now time.Time) {
	samples := map[string]*taskSample{} // by jobKey + gpuID + time
	var order []string
	holders := map[string]int{} // tasks per GPU or slice and collection in this batch
	forEachPoint(md, func(name string, l labels, t, start int64, v float64) {
		switch name {
		case metricTaskMem, metricTaskUtil, metricTaskSMActive:
			s := c.sample(samples, &order, l, t)
			if s == nil {
				return
			}
			switch name {
			case metricTaskMem:
				if !s.haveMem {
					holders[s.holdersKey()]++
				}
				s.mem, s.haveMem = v, true
			case metricTaskUtil:
				s.util = &v
			default:
				s.sm = &v
			}
		default:
			c.gpuFact(name, l, counter{V: v, Start: start}, now)
		}
	})
	for _, k := range order {
		s := samples[k]
		if !s.haveMem {
			continue // task_gpu_mem_percent is on every GPU and slice a task holds
		}
		j := c.totals.Jobs[s.jobKey]
		if j == nil {
			j = &job{Job: map[string]string{}, GPUs: map[string]*jobGPU{}, Start: s.t, End: s.t}
			for _, label := range c.cfg.JobLabels {
				j.Job[label], _ = s.get(label)
			}
			c.totals.Jobs[s.jobKey] = j
		}
		if u, ok := s.get(c.cfg.UserLabel); ok {
			j.User = u
		}
		j.Start, j.End = min(j.Start, s.t), max(j.End, s.t)
		j.LastSeen = now
		g := j.GPUs[s.gpuID]
		if g == nil {
			g = &jobGPU{NodeName: s.node, UUID: s.uuid, MinorNumber: s.minor, MIGUUID: s.mig}
			j.GPUs[s.gpuID] = g
		}
		c.add(g, s, c.share(s, holders[s.holdersKey()]))
	}
}

// holdersKey is s's GPU or slice at s's collection: a batch may hold several collections.
func (s *taskSample) holdersKey() string { return s.gpuID + "@" + strconv.FormatInt(s.t, 10) }

// sample returns the batch's sample of l's task and GPU at t, nil for a series of no job.
func (c *recorder) sample(samples map[string]*taskSample, order *[]string, l labels, t int64) *taskSample {
	values := make([]string, len(c.cfg.JobLabels))
	for i, label := range c.cfg.JobLabels {
		v, ok := l.get(label)
		if !ok {
			return nil
		}
		values[i] = v
	}
	node, _ := l.get(gpunames.KeyNodeName)
	uuid, _ := l.get(gpunames.KeyUUID)
	minor, _ := l.get(gpunames.KeyMinorNumber)
	mig, _ := l.get(gpunames.KeyMIGUUID)
	jobKeyBytes, _ := json.Marshal(values) // strings only: cannot fail
	jk := string(jobKeyBytes)
	gid := gpuKey(node, uuid) + "/" + mig
	// A task's own identity (container, pod) keeps two tasks of one job on one shared GPU
	// apart within the batch.
	task := make([]string, 0, 3)
	for _, k := range []string{"container_id", "pod_uid", "task_index"} {
		v, _ := l.get(k)
		task = append(task, v)
	}
	k := jk + "\x00" + gid + "\x00" + strings.Join(task, "\x00") + "\x00" + time.Unix(0, t).String()
	s := samples[k]
	if s == nil {
		s = &taskSample{labels: l, t: t, node: node, uuid: uuid, minor: minor, mig: mig, jobKey: jk, gpuID: gid}
		samples[k] = s
		*order = append(*order, k)
	}
	return s
}

// share is the part of its GPU a task holds, as job-cost.yaml's task_gpu:allocated:ratio:
// a GPU split equally between the tasks that hold it, a MIG slice its share of the GPU's MIG
// memory split between its tasks.
func (c *recorder) share(s *taskSample, holders int) float64 {
	share := 1 / float64(max(holders, 1))
	if s.mig == "" {
		return share
	}
	f := c.totals.GPUs[gpuKey(s.node, s.uuid)]
	if f == nil || f.MIGMemory[s.mig] == 0 {
		return share
	}
	var sum float64
	for _, b := range f.MIGMemory {
		sum += b
	}
	return share * f.MIGMemory[s.mig] / sum
}

// gpuFact keeps the latest value of a GPU's own series.
func (c *recorder) gpuFact(name string, l labels, v counter, now time.Time) {
	switch name {
	case gpunames.GPUEnergyJoulesTotal, gpunames.GPUClockEventReason, gpunames.GPUXIDErrorsTotal, gpunames.NvidiasmiECCErrorCount, gpunames.GPUInfo, gpunames.GPUMIGMemoryTotalBytes:
	default:
		return
	}
	node, _ := l.get(gpunames.KeyNodeName)
	uuid, ok := l.get(gpunames.KeyUUID)
	if !ok {
		return
	}
	f := c.totals.GPUs[gpuKey(node, uuid)]
	if f == nil {
		f = &gpuFacts{}
		c.totals.GPUs[gpuKey(node, uuid)] = f
	}
	f.Seen = now
	switch name {
	case gpunames.GPUEnergyJoulesTotal:
		f.Energy = &v.V
	case gpunames.GPUClockEventReason:
		reason, _ := l.get(gpunames.KeyReason)
		f.Throttled = setKey(f.Throttled, reason, v.V != 0)
	case gpunames.GPUXIDErrorsTotal:
		// One series per code and resolution; a code has one resolution at a time.
		code, _ := l.get(gpunames.KeyXID)
		f.XIDs = setKey(f.XIDs, code, v)
	case gpunames.NvidiasmiECCErrorCount:
		typ, _ := l.get(gpunames.KeyType)
		f.ECC = setKey(f.ECC, typ, counter{V: v.V}) // a gauge: a drop is the reset
	case gpunames.GPUInfo:
		f.Model, _ = l.get(gpunames.KeyModel)
	case gpunames.GPUMIGMemoryTotalBytes:
		mig, _ := l.get(gpunames.KeyMIGUUID)
		f.MIGMemory = setKey(f.MIGMemory, mig, v.V)
	}
}

func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

// add counts the interval from g's last sample to s: s's values hold over it, as the
// GPUs' counters' increase does. A first sample, or one after a gap longer than max_gap,
// starts the count afresh.
func (c *recorder) add(g *jobGPU, s *taskSample, share float64) {
	f := c.totals.GPUs[gpuKey(s.node, s.uuid)]
	if f == nil {
		f = &gpuFacts{}
	}
	dt := time.Duration(s.t - g.LastT).Seconds()
	switch {
	case g.LastT == 0:
	case s.t <= g.LastT:
		return // a sample replayed or out of order: counted already
	case time.Duration(s.t-g.LastT) > c.cfg.MaxGap:
		g.Unknown += dt
	default:
		g.Held += dt
		g.Allocated += dt * share
		g.MemTime += dt
		g.MemSum += dt * s.mem
		if s.util != nil {
			g.UtilTime += dt
			g.UtilSum += dt * *s.util / 100
		}
		if s.sm != nil {
			g.SMTime += dt
			g.SMSum += dt * *s.sm / 100
		}
		if f.Energy != nil && g.Energy != nil && *f.Energy >= *g.Energy {
			g.Joules += (*f.Energy - *g.Energy) * share
		}
		throttled := false
		for _, r := range c.cfg.ThrottleReasons {
			if f.Throttled[r] {
				throttled = true
				g.ByReason = setKey(g.ByReason, r, g.ByReason[r]+dt)
			}
		}
		if throttled {
			g.Throttled += dt
		}
		for code, n := range increases(g.XIDs, f.XIDs) {
			g.XIDCount = setKey(g.XIDCount, code, g.XIDCount[code]+n)
		}
		ecc := increases(g.ECC, f.ECC)
		g.ECCSingle += ecc["single"]
		g.ECCDouble += ecc["double"]
	}
	g.MemPeak = max(g.MemPeak, s.mem)
	if s.util != nil {
		g.UtilPeak = max(g.UtilPeak, *s.util)
	}
	g.LastT = s.t
	if f.Energy != nil {
		e := *f.Energy
		g.Energy = &e
	}
	g.XIDs = maps.Clone(f.XIDs)
	g.ECC = maps.Clone(f.ECC)
}

// increases is each counter's increase from before to now: a counter that went down or
// started anew was reset (the agent or the driver restarted) and counts from zero; one that is
// new counts in full (the receiver creates an XID's series at its first occurrence).
func increases(before, now map[string]counter) map[string]int64 {
	out := map[string]int64{}
	for k, v := range now {
		b, seen := before[k]
		switch {
		case !seen || v.Start != b.Start || v.V < b.V:
			if v.V > 0 {
				out[k] = int64(v.V)
			}
		case v.V > b.V:
			out[k] = int64(v.V - b.V)
		}
	}
	return out
}

// record is j's record.
func (c *recorder) record(j *job) jobrecord.Record {
	r := jobrecord.Record{
		Job: j.Job, User: j.User,
		Start: time.Unix(0, j.Start).UTC(), End: time.Unix(0, j.End).UTC(),
	}
	var utilTime, utilSum, memTime, memSum, smTime, smSum float64
	keys := make([]string, 0, len(j.GPUs))
	for k := range j.GPUs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := j.GPUs[k]
		model := ""
		if f := c.totals.GPUs[gpuKey(g.NodeName, g.UUID)]; f != nil {
			model = f.Model
		}
		r.GPUs = append(r.GPUs, jobrecord.GPU{
			NodeName: g.NodeName, UUID: g.UUID, MinorNumber: g.MinorNumber, MIGUUID: g.MIGUUID,
			Model: model, HeldHours: g.Held / 3600, AllocatedHours: g.Allocated / 3600, EnergyJoules: g.Joules,
		})
		r.HeldHours += g.Held / 3600
		r.AllocatedHours += g.Allocated / 3600
		r.UsedHours += g.UtilSum / 3600
		utilTime += g.UtilTime
		utilSum += g.UtilSum
		memTime += g.MemTime
		memSum += g.MemSum
		smTime += g.SMTime
		smSum += g.SMSum
		r.UtilizationPeak = max(r.UtilizationPeak, g.UtilPeak)
		r.MemoryPeak = max(r.MemoryPeak, g.MemPeak)
		r.EnergyJoules += g.Joules
		r.ThrottledSeconds += g.Throttled
		for reason, s := range g.ByReason {
			r.ThrottleReasons = setKey(r.ThrottleReasons, reason, r.ThrottleReasons[reason]+s)
		}
		for code, n := range g.XIDCount {
			if r.XIDs == nil {
				r.XIDs = map[string]int64{}
			}
			r.XIDs[code] += n
		}
		r.ECCSingleBit += g.ECCSingle
		r.ECCDoubleBit += g.ECCDouble
		r.UnknownSeconds += g.Unknown
	}
	var efficiency *float64
	if utilTime > 0 {
		r.UtilizationMean = 100 * utilSum / utilTime
		efficiency = &r.UtilizationMean
	}
	if memTime > 0 {
		r.MemoryMean = memSum / memTime
	}
	var smMean *float64
	if smTime > 0 {
		h, m := smSum/3600, 100*smSum/smTime
		r.SMActiveHours, smMean = &h, &m
	}
	r.Verdict = jobrecord.Verdict(efficiency, smMean, c.cfg.IdleBelow, c.cfg.BusyAtLeast, c.cfg.LowSMActiveBelow)
	return r
}

// forEachPoint calls fn with each number data point of a gauge or sum.
func forEachPoint(md pmetric.Metrics, fn func(name string, l labels, t, start int64, v float64)) {
	for _, rm := range md.ResourceMetrics().All() {
		res := rm.Resource().Attributes()
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					continue
				}
				for _, dp := range dps.All() {
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					fn(m.Name(), labels{dp: dp.Attributes(), res: res}, int64(dp.Timestamp()), int64(dp.StartTimestamp()), v)
				}
			}
		}
	}
}
