// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package jobrecord is the record of one job that ended: what the job_record connector emits
// as an OTLP log record and gpureport reads back. The log record's attributes are the contract
// (docs/metrics.md, "The job record"); this package is its one encoding and decoding.
package jobrecord // import "github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// EventName names the log records of ended jobs.
const EventName = "gpu.job.record"

// Verdicts of a job's efficiency.
const (
	VerdictIdle            = "idle"             // used below the idle threshold of what it held
	VerdictUnderused       = "underused"        // between idle and busy
	VerdictBusy            = "busy"             // busy, and SM activity (where measured) not low
	VerdictBusyInefficient = "busy_inefficient" // busy by utilization, low SM activity (GPM)
	VerdictUnknown         = "unknown"          // no utilization measured (MIG slices only)
	attrJob                = "job"
	attrUser               = "user"
	attrStart              = "start"
	attrEnd                = "end"
	attrGPUs               = "gpus"
	attrGPUCount           = "gpu_count"
	attrModels             = "gpu_models"
	attrHeldHours          = "gpu_hours_held"
	attrAllocatedHours     = "gpu_hours_allocated"
	attrUsedHours          = "gpu_hours_used"
	attrSMActiveHours      = "sm_active_hours"
	attrUtilMean           = "utilization_mean"
	attrUtilPeak           = "utilization_peak"
	attrMemMean            = "memory_mean"
	attrMemPeak            = "memory_peak"
	attrEnergy             = "energy_joules"
	attrThrottled          = "throttled_seconds"
	attrThrottleReasons    = "throttle_reasons"
	attrXIDs               = "xids"
	attrECCSingle          = "ecc_single_bit"
	attrECCDouble          = "ecc_double_bit"
	attrUnknownSeconds     = "unknown_seconds"
	attrVerdict            = "verdict"
	attrGPUNode            = "node_name"
	attrGPUUUID            = "uuid"
	attrGPUMinor           = "minor_number"
	attrGPUMIG             = "mig_uuid"
	attrGPUModel           = "model"
	attrGPUHeld            = "hours_held"
	attrGPUAllocated       = "hours_allocated"
	attrGPUEnergy          = "energy_joules"
)

// Record is one ended job.
type Record struct {
	// Job is the values of the connector's job_labels, by label.
	Job   map[string]string `json:"job"`
	User  string            `json:"user"`
	Start time.Time         `json:"start"`
	End   time.Time         `json:"end"`
	GPUs  []GPU             `json:"gpus"`
	// HeldHours is the time each GPU (or MIG slice) was held, summed; AllocatedHours weighs
	// it by the job's share (a GPU time-sliced between n tasks is 1/n each, a MIG slice its
	// share of the GPU's MIG memory), as job-cost.yaml's task_gpu:allocated:ratio does.
	HeldHours      float64 `json:"gpu_hours_held"`
	AllocatedHours float64 `json:"gpu_hours_allocated"`
	// UsedHours is held time weighted by utilization (absent on MIG slices: NVML has none).
	UsedHours float64 `json:"gpu_hours_used"`
	// SMActiveHours is held time weighted by SM activity; nil where no GPU had GPM.
	SMActiveHours *float64 `json:"sm_active_hours,omitempty"`
	// Means are time-weighted over the time measured; peaks the highest sample. Percent.
	UtilizationMean float64 `json:"utilization_mean"`
	UtilizationPeak float64 `json:"utilization_peak"`
	MemoryMean      float64 `json:"memory_mean"`
	MemoryPeak      float64 `json:"memory_peak"`
	// EnergyJoules is the GPUs' energy counters' increase while the job held them, by share.
	EnergyJoules float64 `json:"energy_joules"`
	// ThrottledSeconds is GPU-time with a throttle reason active (summed over GPUs); per
	// reason in ThrottleReasons.
	ThrottledSeconds float64            `json:"throttled_seconds"`
	ThrottleReasons  map[string]float64 `json:"throttle_reasons,omitempty"`
	// XIDs counts the XID errors on the job's GPUs while it held them, by code.
	XIDs         map[string]int64 `json:"xids,omitempty"`
	ECCSingleBit int64            `json:"ecc_single_bit"`
	ECCDoubleBit int64            `json:"ecc_double_bit"`
	// UnknownSeconds is GPU-time in gaps longer than max_gap between two samples: counted in
	// no other field.
	UnknownSeconds float64 `json:"unknown_seconds"`
	Verdict        string  `json:"verdict"`
}

// GPU is one GPU (or MIG slice) the job held.
type GPU struct {
	NodeName       string  `json:"node_name"`
	UUID           string  `json:"uuid"`
	MinorNumber    string  `json:"minor_number"`
	MIGUUID        string  `json:"mig_uuid,omitempty"`
	Model          string  `json:"model"`
	HeldHours      float64 `json:"hours_held"`
	AllocatedHours float64 `json:"hours_allocated"`
	EnergyJoules   float64 `json:"energy_joules"`
}

// Models is the job's GPU models, sorted, each once.
func (r *Record) Models() []string {
	var models []string
	for _, g := range r.GPUs {
		if g.Model != "" && !slices.Contains(models, g.Model) {
			models = append(models, g.Model)
		}
	}
	slices.Sort(models)
	return models
}

// Verdict judges a job by its efficiency (used/held, percent; nil where no utilization was
// measured) and mean SM activity (nil where not measured), with gpureport's thresholds.
func Verdict(efficiency, smActive *float64, idleBelow, busyAtLeast, lowSMBelow float64) string {
	switch {
	case efficiency == nil:
		return VerdictUnknown
	case *efficiency < idleBelow:
		return VerdictIdle
	case *efficiency < busyAtLeast:
		return VerdictUnderused
	case smActive != nil && *smActive < lowSMBelow:
		return VerdictBusyInefficient
	default:
		return VerdictBusy
	}
}

// ToLogRecord writes r into lr: event name, timestamp (the end), attributes and a one-line body.
func (r *Record) ToLogRecord(lr plog.LogRecord) {
	lr.SetEventName(EventName)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(r.End))
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	lr.SetSeverityText("INFO")
	lr.Body().SetStr(fmt.Sprintf("job %v of %s ended: %d GPUs, %.2f GPU-hours held, %.2f used, %.0f J, %s",
		r.Job, r.User, len(r.GPUs), r.HeldHours, r.UsedHours, r.EnergyJoules, r.Verdict))
	a := lr.Attributes()
	job := a.PutEmptyMap(attrJob)
	for k, v := range r.Job {
		job.PutStr(k, v)
	}
	a.PutStr(attrUser, r.User)
	a.PutStr(attrStart, r.Start.UTC().Format(time.RFC3339Nano))
	a.PutStr(attrEnd, r.End.UTC().Format(time.RFC3339Nano))
	a.PutInt(attrGPUCount, int64(len(r.GPUs)))
	models := a.PutEmptySlice(attrModels)
	for _, m := range r.Models() {
		models.AppendEmpty().SetStr(m)
	}
	gpus := a.PutEmptySlice(attrGPUs)
	for _, g := range r.GPUs {
		m := gpus.AppendEmpty().SetEmptyMap()
		m.PutStr(attrGPUNode, g.NodeName)
		m.PutStr(attrGPUUUID, g.UUID)
		m.PutStr(attrGPUMinor, g.MinorNumber)
		if g.MIGUUID != "" {
			m.PutStr(attrGPUMIG, g.MIGUUID)
		}
		m.PutStr(attrGPUModel, g.Model)
		m.PutDouble(attrGPUHeld, g.HeldHours)
		m.PutDouble(attrGPUAllocated, g.AllocatedHours)
		m.PutDouble(attrGPUEnergy, g.EnergyJoules)
	}
	a.PutDouble(attrHeldHours, r.HeldHours)
	a.PutDouble(attrAllocatedHours, r.AllocatedHours)
	a.PutDouble(attrUsedHours, r.UsedHours)
	if r.SMActiveHours != nil {
		a.PutDouble(attrSMActiveHours, *r.SMActiveHours)
	}
	a.PutDouble(attrUtilMean, r.UtilizationMean)
	a.PutDouble(attrUtilPeak, r.UtilizationPeak)
	a.PutDouble(attrMemMean, r.MemoryMean)
	a.PutDouble(attrMemPeak, r.MemoryPeak)
	a.PutDouble(attrEnergy, r.EnergyJoules)
	a.PutDouble(attrThrottled, r.ThrottledSeconds)
	reasons := a.PutEmptyMap(attrThrottleReasons)
	for k, v := range r.ThrottleReasons {
		reasons.PutDouble(k, v)
	}
	xids := a.PutEmptyMap(attrXIDs)
	for k, v := range r.XIDs {
		xids.PutInt(k, v)
	}
	a.PutInt(attrECCSingle, r.ECCSingleBit)
	a.PutInt(attrECCDouble, r.ECCDoubleBit)
	a.PutDouble(attrUnknownSeconds, r.UnknownSeconds)
	a.PutStr(attrVerdict, r.Verdict)
}

// FromLogRecord reads a record back from lr; an error names the attribute that is missing or
// of the wrong type.
func FromLogRecord(lr plog.LogRecord) (Record, error) {
	if lr.EventName() != EventName {
		return Record{}, fmt.Errorf("event name %q, not %q", lr.EventName(), EventName)
	}
	d := decoder{a: lr.Attributes()}
	var r Record
	r.Job = d.strMap(attrJob)
	r.User = d.str(attrUser)
	r.Start = d.time(attrStart)
	r.End = d.time(attrEnd)
	if v, ok := d.a.Get(attrGPUs); !ok || v.Type() != pcommon.ValueTypeSlice {
		d.fail(attrGPUs, "a list")
	} else {
		for i := 0; i < v.Slice().Len(); i++ {
			e := v.Slice().At(i)
			if e.Type() != pcommon.ValueTypeMap {
				d.fail(attrGPUs+"["+strconv.Itoa(i)+"]", "a map")
				continue
			}
			g := decoder{a: e.Map()}
			r.GPUs = append(r.GPUs, GPU{
				NodeName:       g.str(attrGPUNode),
				UUID:           g.str(attrGPUUUID),
				MinorNumber:    g.str(attrGPUMinor),
				MIGUUID:        g.optStr(attrGPUMIG),
				Model:          g.str(attrGPUModel),
				HeldHours:      g.num(attrGPUHeld),
				AllocatedHours: g.num(attrGPUAllocated),
				EnergyJoules:   g.num(attrGPUEnergy),
			})
			d.errs = append(d.errs, g.errs...)
		}
	}
	r.HeldHours = d.num(attrHeldHours)
	r.AllocatedHours = d.num(attrAllocatedHours)
	r.UsedHours = d.num(attrUsedHours)
	if _, ok := d.a.Get(attrSMActiveHours); ok {
		v := d.num(attrSMActiveHours)
		r.SMActiveHours = &v
	}
	r.UtilizationMean = d.num(attrUtilMean)
	r.UtilizationPeak = d.num(attrUtilPeak)
	r.MemoryMean = d.num(attrMemMean)
	r.MemoryPeak = d.num(attrMemPeak)
	r.EnergyJoules = d.num(attrEnergy)
	r.ThrottledSeconds = d.num(attrThrottled)
	if reasons := d.numMap(attrThrottleReasons); len(reasons) > 0 {
		r.ThrottleReasons = reasons
	}
	if xids := d.numMap(attrXIDs); len(xids) > 0 {
		r.XIDs = make(map[string]int64, len(xids))
		for k, v := range xids {
			r.XIDs[k] = int64(v)
		}
	}
	r.ECCSingleBit = int64(d.num(attrECCSingle))
	r.ECCDoubleBit = int64(d.num(attrECCDouble))
	r.UnknownSeconds = d.num(attrUnknownSeconds)
	r.Verdict = d.str(attrVerdict)
	return r, errors.Join(d.errs...)
}

type decoder struct {
	a    pcommon.Map
	errs []error
}

func (d *decoder) fail(key, want string) {
	d.errs = append(d.errs, fmt.Errorf("attribute %q: missing or not %s", key, want))
}

func (d *decoder) str(key string) string {
	v, ok := d.a.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		d.fail(key, "a string")
		return ""
	}
	return v.Str()
}

func (d *decoder) optStr(key string) string {
	if _, ok := d.a.Get(key); !ok {
		return ""
	}
	return d.str(key)
}

func (d *decoder) time(key string) time.Time {
	s := d.str(key)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("attribute %q: %w", key, err))
	}
	return t
}

func (d *decoder) num(key string) float64 {
	v, ok := d.a.Get(key)
	if ok {
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			return v.Double()
		case pcommon.ValueTypeInt:
			return float64(v.Int())
		default:
		}
	}
	d.fail(key, "a number")
	return 0
}

func (d *decoder) strMap(key string) map[string]string {
	v, ok := d.a.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeMap {
		d.fail(key, "a map")
		return nil
	}
	out := make(map[string]string, v.Map().Len())
	for k, e := range v.Map().All() {
		out[k] = e.AsString()
	}
	return out
}

func (d *decoder) numMap(key string) map[string]float64 {
	v, ok := d.a.Get(key)
	if !ok {
		return nil
	}
	if v.Type() != pcommon.ValueTypeMap {
		d.fail(key, "a map")
		return nil
	}
	out := make(map[string]float64, v.Map().Len())
	inner := decoder{a: v.Map()}
	for k := range v.Map().All() {
		out[k] = inner.num(k)
	}
	d.errs = append(d.errs, inner.errs...)
	return out
}
