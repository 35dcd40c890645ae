// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// The fleet-health recording rules' state series (deploy/prometheus/rules/fleet-health.yaml),
// 0/1 once a minute per node or GPU, and the health writer's fault counter, which the rules'
// fault count reads too. The report integrates them over each week as it does every gauge.
const (
	ruleOutOfService        = "node:gpu_node_out_of_service:bool"
	ruleUnhealthy           = "node:gpu_node_unhealthy:bool"
	ruleQuarantined         = "node:gpu_node_quarantined:bool"
	ruleValidationPending   = "node:gpu_node_validation_pending:bool"
	ruleQuarantinedByAction = "node:gpu_node_quarantined_by_action:bool"
	ruleGPUHealthy          = "gpu:gpu_healthy:bool"
	metricNodeFaults        = "gpu_node_faults_total"

	labelAction = "action"
	// FileFleet is the fleet-health section's CSV file.
	FileFleet = "fleet_health.csv"
	week      = 7 * 24 * time.Hour
	// poolUnknown is the pool of a node without gpu_info.
	poolUnknown = "unknown"
)

// FleetHealth is one node pool's GPU health in one week of the period: how often its nodes had
// a fault that calls for action, how long they were out of service, and how the quarantine's
// escalation went. Node-hours, except GPU availability, which is the GPUs'.
type FleetHealth struct {
	WeekStart time.Time `json:"week_start"`
	WeekEnd   time.Time `json:"week_end"`
	// Pool is the GPU model of its nodes (gpu_info's model; several joined with " + ").
	Pool   string  `json:"pool"`
	Nodes  int     `json:"nodes"`
	GPUs   int     `json:"gpus"`
	Faults float64 `json:"faults"`
	// UnhealthyHours: GPUHealthy False; QuarantinedHours: cordoned by the quarantine, by the
	// action it held the node for; ValidationHours: held by the validation gate.
	UnhealthyHours           float64            `json:"node_hours_unhealthy"`
	QuarantinedHours         float64            `json:"node_hours_quarantined"`
	QuarantinedHoursByAction map[string]float64 `json:"node_hours_quarantined_by_action"`
	ValidationHours          float64            `json:"node_hours_validation_pending"`
	// MeanTimeToRepairHours is the unhealthy time per fault (the rules' time to repair), null
	// without a fault; MaxTimeToRepairHours the longest stretch of GPUHealthy False in the week.
	MeanTimeToRepairHours JSONNum `json:"mean_time_to_repair_hours"`
	MaxTimeToRepairHours  float64 `json:"max_time_to_repair_hours"`
	// MeanTimeBetweenFaultsHours is the time in service per fault, null without a fault.
	MeanTimeBetweenFaultsHours JSONNum `json:"mean_time_between_faults_hours"`
	// NodeAvailability is the share of the known time its nodes were in service (neither
	// unhealthy, quarantined nor held by the gate); GPUAvailability the share its GPUs were
	// healthy. Null when nothing is known.
	NodeAvailability JSONNum `json:"node_availability"`
	GPUAvailability  JSONNum `json:"gpu_availability"`
	// Quarantines counts the quarantines held in the week by the action they held the node for
	// last: the escalation reset_gpu → reboot → inspect_hardware shows as quarantines moving up.
	Quarantines map[string]int `json:"quarantines_by_last_action"`
}

// fleetInputs are one batch of nodes' series of the fleet-health rules.
type fleetInputs struct {
	outOfService, unhealthy, quarantined, validation, byAction, gpuHealthy, faults []series
}

// fetchFleet reads the fleet-health series of the nodes matcher selects.
func fetchFleet(ctx context.Context, f fetcher, matcher string, from, to time.Time) (fleetInputs, []string, error) {
	var in fleetInputs
	var warnings []string
	for _, q := range []struct {
		dst      *[]series
		selector string
	}{
		{&in.outOfService, ruleOutOfService + matcher},
		{&in.unhealthy, ruleUnhealthy + matcher},
		{&in.quarantined, ruleQuarantined + matcher},
		{&in.validation, ruleValidationPending + matcher},
		{&in.byAction, ruleQuarantinedByAction + matcher},
		{&in.gpuHealthy, ruleGPUHealthy + matcher},
		// Replayed faults (an edge backlog) inform and call for nothing, as in the rules.
		{&in.faults, metricNodeFaults + strings.TrimSuffix(matcher, "}") + `,replayed="false"}`},
	} {
		s, warns, err := f.raw(ctx, q.selector, from, to)
		if err != nil {
			return in, nil, err
		}
		*q.dst = s
		warnings = append(warnings, warns...)
	}
	return in, warnings, nil
}

// nodePools maps each node that reported gpu_info in the period to its pool: its GPUs' model.
func nodePools(ctx context.Context, api querier, o Options) (map[string]string, []string, error) {
	q := fmt.Sprintf("group by (%s, %s) (last_over_time(%s[%s]))", gpunames.KeyNodeName, gpunames.KeyModel,
		gpunames.GPUInfo, model.Duration(o.End.Sub(o.Start)+o.MaxGap))
	val, warns, _, err := api.Query(ctx, q, o.End)
	if err != nil {
		return nil, nil, fmt.Errorf("query %s: %w", q, err)
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, nil, fmt.Errorf("query %s: want an instant vector, got %s", q, val.Type())
	}
	models := map[string][]string{}
	for _, s := range vec {
		node := string(s.Metric[gpunames.KeyNodeName])
		models[node] = append(models[node], string(s.Metric[gpunames.KeyModel]))
	}
	pools := map[string]string{}
	for node, m := range models {
		sort.Strings(m)
		pools[node] = strings.Join(m, " + ")
	}
	return pools, warns, nil
}

// FleetRules are the rules of groups that record the series this section reads, with the
// groups they are in (the demo and the tests record them over backfilled data).
func FleetRules(groups []rulefmt.RuleGroup) []rulefmt.RuleGroup {
	read := map[string]bool{
		ruleOutOfService: true, ruleUnhealthy: true, ruleQuarantined: true, ruleValidationPending: true,
		ruleQuarantinedByAction: true, ruleGPUHealthy: true,
	}
	var out []rulefmt.RuleGroup
	for _, g := range groups {
		kept := g
		kept.Rules = nil
		for _, r := range g.Rules {
			if read[r.Record] {
				kept.Rules = append(kept.Rules, r)
			}
		}
		if len(kept.Rules) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// weeks splits the period into weeks counted back from its end; the first may be shorter.
func weeks(o Options) []window {
	var out []window
	for end := o.End; end.After(o.Start); end = end.Add(-week) {
		start := end.Add(-week)
		if start.Before(o.Start) {
			start = o.Start
		}
		out = append([]window{{start.UnixMilli(), end.UnixMilli()}}, out...)
	}
	return out
}

// nodeWeek is one node's week, in milliseconds.
type nodeWeek struct {
	knownMs, outMs, unhealthyMs, longestUnhealthyMs, quarantinedMs, validationMs int64
	byActionMs                                                                   map[string]int64
	faults                                                                       float64
	quarantines                                                                  map[string]int
	gpus                                                                         map[string]bool
	gpuKnownMs, gpuHealthyMs                                                     int64
}

// fleetAcc sums batches of nodes' fleet-health series per node and week.
type fleetAcc struct {
	weeks  []window
	maxGap int64
	nodes  map[string][]nodeWeek
}

func newFleetAcc(o Options) *fleetAcc {
	return &fleetAcc{weeks: weeks(o), maxGap: o.MaxGap.Milliseconds(), nodes: map[string][]nodeWeek{}}
}

func (a *fleetAcc) node(labels model.Metric) []nodeWeek {
	name := string(labels[gpunames.KeyNodeName])
	nw := a.nodes[name]
	if nw == nil {
		nw = make([]nodeWeek, len(a.weeks))
		for i := range nw {
			nw[i] = nodeWeek{byActionMs: map[string]int64{}, quarantines: map[string]int{}, gpus: map[string]bool{}}
		}
		a.nodes[name] = nw
	}
	return nw
}

// activeMs is the time a 0/1 timeline was 1.
func activeMs(segs []segment) int64 {
	var ms int64
	for _, s := range segs {
		if s.v > 0 {
			ms += s.duration()
		}
	}
	return ms
}

// longestActiveMs is the longest stretch of consecutive segments at 1.
func longestActiveMs(segs []segment) int64 {
	var longest, run, end int64
	for _, s := range segs {
		switch {
		case s.v <= 0:
			run = 0
		case run > 0 && s.start == end:
			run += s.duration()
		default:
			run = s.duration()
		}
		end = s.end
		longest = max(longest, run)
	}
	return longest
}

func (a *fleetAcc) add(in fleetInputs) {
	for wi, w := range a.weeks {
		state := func(ss []series, f func(nw *nodeWeek, tl timeline)) {
			for _, s := range ss {
				f(&a.node(s.labels)[wi], stepTimeline(s.samples, w, a.maxGap))
			}
		}
		state(in.outOfService, func(nw *nodeWeek, tl timeline) {
			nw.knownMs += tl.knownMs()
			nw.outMs += activeMs(tl.segments)
		})
		state(in.unhealthy, func(nw *nodeWeek, tl timeline) {
			nw.unhealthyMs += activeMs(tl.segments)
			nw.longestUnhealthyMs = max(nw.longestUnhealthyMs, longestActiveMs(tl.segments))
		})
		state(in.quarantined, func(nw *nodeWeek, tl timeline) { nw.quarantinedMs += activeMs(tl.segments) })
		state(in.validation, func(nw *nodeWeek, tl timeline) { nw.validationMs += activeMs(tl.segments) })
		state(in.gpuHealthy, func(nw *nodeWeek, tl timeline) {
			nw.gpuKnownMs += tl.knownMs()
			nw.gpuHealthyMs += activeMs(tl.segments)
		})
		for _, s := range in.gpuHealthy {
			a.node(s.labels)[wi].gpus[gpuKey(s.labels)] = true
		}
		for _, s := range in.faults {
			a.node(s.labels)[wi].faults += counterIncrease(s.samples, w)
		}
		a.addQuarantines(in.byAction, wi, w)
	}
}

// addQuarantines counts each node's quarantines in the week by the action they held the node
// for last: a quarantine is the stretch of any action's series, an escalation within it (the
// action changing) one quarantine.
func (a *fleetAcc) addQuarantines(byAction []series, wi int, w window) {
	type held struct {
		segment
		action string
	}
	perNode := map[string][]held{}
	for _, s := range byAction {
		nw := &a.node(s.labels)[wi]
		action := string(s.labels[labelAction])
		for _, seg := range stepTimeline(s.samples, w, a.maxGap).segments {
			if seg.v > 0 {
				nw.byActionMs[action] += seg.duration()
				node := string(s.labels[gpunames.KeyNodeName])
				perNode[node] = append(perNode[node], held{seg, action})
			}
		}
	}
	for node, hs := range perNode {
		sort.Slice(hs, func(i, j int) bool { return hs[i].start < hs[j].start })
		nw := &a.nodes[node][wi]
		last := hs[0]
		for _, h := range hs[1:] {
			if h.start-last.end > a.maxGap {
				nw.quarantines[last.action]++
				last = h
				continue
			}
			if h.end >= last.end {
				last = h
			}
		}
		nw.quarantines[last.action]++
	}
}

// report sums the nodes' weeks per pool.
func (a *fleetAcc) report(pools map[string]string) []FleetHealth {
	var out []FleetHealth
	for wi, w := range a.weeks {
		byPool := map[string]*nodeWeek{}
		nodes := map[string]int{}
		for node, nws := range a.nodes {
			nw := nws[wi]
			if nw.knownMs == 0 && nw.gpuKnownMs == 0 {
				continue
			}
			pool := pools[node]
			if pool == "" {
				pool = poolUnknown
			}
			p := byPool[pool]
			if p == nil {
				p = &nodeWeek{byActionMs: map[string]int64{}, quarantines: map[string]int{}, gpus: map[string]bool{}}
				byPool[pool] = p
			}
			nodes[pool]++
			p.knownMs += nw.knownMs
			p.outMs += nw.outMs
			p.unhealthyMs += nw.unhealthyMs
			p.longestUnhealthyMs = max(p.longestUnhealthyMs, nw.longestUnhealthyMs)
			p.quarantinedMs += nw.quarantinedMs
			p.validationMs += nw.validationMs
			p.faults += nw.faults
			p.gpuKnownMs += nw.gpuKnownMs
			p.gpuHealthyMs += nw.gpuHealthyMs
			for action, ms := range nw.byActionMs {
				p.byActionMs[action] += ms
			}
			for action, n := range nw.quarantines {
				p.quarantines[action] += n
			}
			for g := range nw.gpus {
				p.gpus[g] = true
			}
		}
		for _, pool := range sortedKeys(byPool) {
			out = append(out, fleetRow(byPool[pool], pool, nodes[pool], w))
		}
	}
	return out
}

func fleetRow(p *nodeWeek, pool string, nodes int, w window) FleetHealth {
	hours := func(ms int64) float64 { return float64(ms) / msPerHour }
	ratio := func(num, den int64) JSONNum {
		if den == 0 {
			return JSONNum(math.NaN())
		}
		return JSONNum(float64(num) / float64(den))
	}
	perFault := func(ms int64) JSONNum {
		if p.faults == 0 {
			return JSONNum(math.NaN())
		}
		return JSONNum(hours(ms) / p.faults)
	}
	byAction := map[string]float64{}
	for action, ms := range p.byActionMs {
		byAction[action] = hours(ms)
	}
	return FleetHealth{
		WeekStart: time.UnixMilli(w.start).UTC(), WeekEnd: time.UnixMilli(w.end).UTC(),
		Pool: pool, Nodes: nodes, GPUs: len(p.gpus), Faults: p.faults,
		UnhealthyHours: hours(p.unhealthyMs), QuarantinedHours: hours(p.quarantinedMs),
		QuarantinedHoursByAction: byAction, ValidationHours: hours(p.validationMs),
		MeanTimeToRepairHours: perFault(p.unhealthyMs), MaxTimeToRepairHours: hours(p.longestUnhealthyMs),
		MeanTimeBetweenFaultsHours: perFault(p.knownMs - p.outMs),
		NodeAvailability:           ratio(p.knownMs-p.outMs, p.knownMs),
		GPUAvailability:            ratio(p.gpuHealthyMs, p.gpuKnownMs),
		Quarantines:                p.quarantines,
	}
}

// quarantineActions are the connector's actions in the order of its escalation.
var quarantineActions = []string{"reset_gpu", "reboot", "check_nvlink", "inspect_hardware"}

func fleetCSV(rows []FleetHealth) [][]string {
	head := []string{
		"week_start", "week_end", "pool", "nodes", "gpus", "faults", "node_hours_unhealthy",
		"node_hours_quarantined", "node_hours_validation_pending", "mean_time_to_repair_hours",
		"max_time_to_repair_hours", "mean_time_between_faults_hours", "node_availability", "gpu_availability",
	}
	for _, a := range quarantineActions {
		head = append(head, "quarantines_"+a, "node_hours_quarantined_"+a)
	}
	out := [][]string{head}
	for i := range rows {
		r := &rows[i]
		row := []string{
			r.WeekStart.Format(time.RFC3339), r.WeekEnd.Format(time.RFC3339), r.Pool, strconv.Itoa(r.Nodes),
			strconv.Itoa(r.GPUs), num(r.Faults), num(r.UnhealthyHours), num(r.QuarantinedHours),
			num(r.ValidationHours), optNum(r.MeanTimeToRepairHours), num(r.MaxTimeToRepairHours),
			optNum(r.MeanTimeBetweenFaultsHours), optNum(r.NodeAvailability), optNum(r.GPUAvailability),
		}
		for _, a := range quarantineActions {
			row = append(row, strconv.Itoa(r.Quarantines[a]), num(r.QuarantinedHoursByAction[a]))
		}
		out = append(out, row)
	}
	return out
}

//go:embed fleet.html.tmpl
var fleetTemplate string

// fleetFuncs are the fleet section's template functions.
var fleetFuncs = map[string]any{
	// optHours and optPct show a value that may be unknown (null): a dash then.
	"optHours": func(h JSONNum) string {
		if math.IsNaN(float64(h)) {
			return "–"
		}
		return fmt.Sprintf("%.1f", float64(h))
	},
	"optPct": func(f JSONNum) string {
		if math.IsNaN(float64(f)) {
			return "–"
		}
		return fmt.Sprintf("%.1f %%", float64(f)*100)
	},
	"day":     func(t time.Time) string { return t.UTC().Format("2 Jan 2006") },
	"actions": func() []string { return quarantineActions },
}
