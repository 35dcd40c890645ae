// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// FileJobRecords lists the ended jobs' records (the job_record connector's) and their cost.
const FileJobRecords = "job_records.csv"

// The recording rules of deploy/prometheus/rules/job-cost.yaml that hold the prices: the one
// place they are set, for Prometheus' cost series and for the report alike.
const (
	priceRule        = "param:gpu_hourly_cost"
	defaultPriceRule = "param:gpu_hourly_cost:default"
)

// Prices is the price of one GPU-hour per GPU model, and of a model not listed.
type Prices struct {
	ByModel map[string]float64 `json:"by_model"`
	Default float64            `json:"default"`
}

// Of is the price of one GPU-hour of model.
func (p *Prices) Of(model string) float64 {
	if v, ok := p.ByModel[model]; ok {
		return v
	}
	return p.Default
}

// ParsePrices reads the prices from a rules file such as job-cost.yaml: each
// param:gpu_hourly_cost rule's model label and vector(<price>), and
// param:gpu_hourly_cost:default's.
func ParsePrices(content []byte) (*Prices, error) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	prices := &Prices{ByModel: map[string]float64{}}
	haveDefault := false
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != priceRule && r.Record != defaultPriceRule {
				continue
			}
			v, err := vectorOf(p, r.Expr)
			if err != nil {
				return nil, fmt.Errorf("rule %s%v: %w", r.Record, r.Labels, err)
			}
			if r.Record == defaultPriceRule {
				prices.Default, haveDefault = v, true
				continue
			}
			m := r.Labels[gpunames.KeyModel]
			if m == "" {
				return nil, fmt.Errorf("rule %s: needs a model label (gpu_info's model)", r.Record)
			}
			if _, dup := prices.ByModel[m]; dup {
				return nil, fmt.Errorf("rule %s: model %q is priced twice", r.Record, m)
			}
			prices.ByModel[m] = v
		}
	}
	if !haveDefault {
		return nil, fmt.Errorf("no %s rule: a GPU of a model not listed would be free", defaultPriceRule)
	}
	return prices, nil
}

// vectorOf is the number of vector(<number>).
func vectorOf(p parser.Parser, expr string) (float64, error) {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return 0, err
	}
	call, ok := e.(*parser.Call)
	if ok && call.Func.Name == "vector" && len(call.Args) == 1 {
		arg := call.Args[0]
		for paren, ok := arg.(*parser.ParenExpr); ok; paren, ok = arg.(*parser.ParenExpr) {
			arg = paren.Expr
		}
		if n, ok := arg.(*parser.NumberLiteral); ok {
			return n.Val, nil
		}
	}
	return 0, fmt.Errorf("expr %q: gpureport reads a price only as vector(<number>)", expr)
}

// JobRecord is an ended job's record, with its cost where prices were given.
type JobRecord struct {
	jobrecord.Record
	// Cost is the allocated GPU-hours of each GPU times its model's price; nil without prices.
	Cost *float64 `json:"cost,omitempty"`
}

// ReadJobRecords reads the records of the jobs that ended in [start, end) from the file
// exporter's JSON lines (one OTLP logs request per line), with their cost when prices is not
// nil. A line or record that cannot be read is skipped and named in problems; the others are
// kept.
func ReadJobRecords(r io.Reader, start, end time.Time, prices *Prices) (records []JobRecord, problems []string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	var u plog.JSONUnmarshaler
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if strings.TrimSpace(string(text)) == "" {
			continue
		}
		ld, err := u.UnmarshalLogs(text)
		if err != nil {
			problems = append(problems, fmt.Sprintf("line %d: not an OTLP logs request: %v", line, err))
			continue
		}
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for i, lr := range sl.LogRecords().All() {
					if lr.EventName() != jobrecord.EventName {
						continue
					}
					rec, err := jobrecord.FromLogRecord(lr)
					if err != nil {
						problems = append(problems, fmt.Sprintf("line %d, record %d: %v", line, i, err))
						continue
					}
					if rec.End.Before(start) || !rec.End.Before(end) {
						continue
					}
					jr := JobRecord{Record: rec}
					if prices != nil {
						var cost float64
						for _, g := range rec.GPUs {
							cost += g.AllocatedHours * prices.Of(g.Model)
						}
						jr.Cost = &cost
					}
					records = append(records, jr)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return records, problems, err
	}
	slices.SortStableFunc(records, func(a, b JobRecord) int { return a.End.Compare(b.End) })
	return records, problems, nil
}

// jobRecordsCSV is one row per record.
func jobRecordsCSV(records []JobRecord) [][]string {
	var labels []string
	for i := range records {
		for k := range records[i].Job {
			if !slices.Contains(labels, k) {
				labels = append(labels, k)
			}
		}
	}
	slices.Sort(labels)
	header := append(slices.Clone(labels), "user", "start", "end", "gpus", "gpu_models",
		"gpu_hours_held", "gpu_hours_allocated", "cost", "gpu_hours_used", "sm_active_hours",
		"utilization_mean", "utilization_peak", "memory_mean", "memory_peak", "energy_joules",
		"throttled_seconds", "xids", "ecc_single_bit", "ecc_double_bit", "unknown_seconds", "verdict")
	rows := [][]string{header}
	for i := range records {
		r := &records[i]
		row := make([]string, 0, len(header))
		for _, l := range labels {
			row = append(row, r.Job[l])
		}
		cost, sm := "", ""
		if r.Cost != nil {
			cost = num(*r.Cost)
		}
		if r.SMActiveHours != nil {
			sm = num(*r.SMActiveHours)
		}
		var xids []string
		for code, n := range r.XIDs {
			xids = append(xids, code+":"+strconv.FormatInt(n, 10))
		}
		slices.Sort(xids)
		row = append(row, r.User, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339),
			strconv.Itoa(len(r.GPUs)), strings.Join(r.Models(), ";"),
			num(r.HeldHours), num(r.AllocatedHours), cost, num(r.UsedHours), sm,
			num(r.UtilizationMean), num(r.UtilizationPeak), num(r.MemoryMean), num(r.MemoryPeak),
			num(r.EnergyJoules), num(r.ThrottledSeconds), strings.Join(xids, ";"),
			strconv.FormatInt(r.ECCSingleBit, 10), strconv.FormatInt(r.ECCDoubleBit, 10),
			num(r.UnknownSeconds), r.Verdict)
		rows = append(rows, row)
	}
	return rows
}
