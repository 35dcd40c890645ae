// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/jobrecord"
)

// TestPricesOfJobCostRules reads the prices from the shipped rules, the one place they are set.
func TestPricesOfJobCostRules(t *testing.T) {
	content, err := os.ReadFile("../../../../deploy/prometheus/rules/job-cost.yaml")
	require.NoError(t, err)
	p, err := ParsePrices(content)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{
		"NVIDIA H100 80GB HBM3":   3.00,
		"NVIDIA A100-SXM4-80GB":   1.80,
		"NVIDIA A100-SXM4-40GB":   1.40,
		"AMD Instinct MI300X OAM": 2.50,
	}, p.ByModel)
	assert.InDelta(t, 1.00, p.Default, 0)
	assert.InDelta(t, 1.00, p.Of("Tesla V100-SXM2-16GB"), 0, "a model not listed costs the default")
}

func TestPricesErrors(t *testing.T) {
	rule := func(record, expr, labels string) string {
		return "groups:\n  - name: g\n    rules:\n      - record: " + record + "\n        expr: " + expr + "\n" + labels
	}
	defaultRule := "      - record: param:gpu_hourly_cost:default\n        expr: vector(1)\n"
	for _, tt := range []struct{ name, content, want string }{
		{"not a number", rule("param:gpu_hourly_cost", "vector(time())", "        labels: {model: X}\n") + defaultRule, `gpureport reads a price only as vector(<number>)`},
		{"no model", rule("param:gpu_hourly_cost", "vector(2)", "") + defaultRule, "needs a model label"},
		{"no default", rule("param:gpu_hourly_cost", "vector(2)", "        labels: {model: X}\n"), "no param:gpu_hourly_cost:default rule"},
		{"twice", rule("param:gpu_hourly_cost", "vector(2)", "        labels: {model: X}\n") + "      - record: param:gpu_hourly_cost\n        expr: vector(3)\n        labels: {model: X}\n" + defaultRule, `model "X" is priced twice`},
		{"not rules", "groups: [{name: g, rules: [{record: a, expr: 'sum('}]}]", "parse error"},
	} {
		_, err := ParsePrices([]byte(tt.content))
		require.Error(t, err, tt.name)
		assert.Contains(t, err.Error(), tt.want, tt.name)
	}
	p, err := ParsePrices([]byte(rule("param:gpu_hourly_cost", "vector((2.5))", "        labels: {model: X}\n") + defaultRule))
	require.NoError(t, err)
	assert.InDelta(t, 2.5, p.Of("X"), 0)
}

var periodStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func sampleRecord(name string, end time.Time) jobrecord.Record {
	sm := 0.5
	return jobrecord.Record{
		Job:  map[string]string{"virtual_cluster": "default", "username": "alice", "job_name": name},
		User: "alice", Start: end.Add(-2 * time.Hour), End: end,
		GPUs: []jobrecord.GPU{
			{NodeName: "n1", UUID: "GPU-a", MinorNumber: "0", Model: "NVIDIA H100 80GB HBM3", HeldHours: 2, AllocatedHours: 2, EnergyJoules: 1e6},
			{NodeName: "n2", UUID: "GPU-b", MinorNumber: "0", MIGUUID: "MIG-x", Model: "Tesla V100", HeldHours: 2, AllocatedHours: 0.5, EnergyJoules: 2e5},
		},
		HeldHours: 4, AllocatedHours: 2.5, UsedHours: 2, SMActiveHours: &sm,
		UtilizationMean: 50, UtilizationPeak: 90, MemoryMean: 40, MemoryPeak: 60, EnergyJoules: 1.2e6,
		ThrottledSeconds: 120, ThrottleReasons: map[string]float64{"power_cap": 120},
		XIDs: map[string]int64{"79": 1}, ECCSingleBit: 3, UnknownSeconds: 30, Verdict: jobrecord.VerdictUnderused,
	}
}

// fileLine is one line of the file exporter (format: json): an OTLP logs request.
func fileLine(t *testing.T, records ...jobrecord.Record) string {
	t.Helper()
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for i := range records {
		records[i].ToLogRecord(sl.LogRecords().AppendEmpty())
	}
	var m plog.JSONMarshaler
	b, err := m.MarshalLogs(ld)
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestReadJobRecords(t *testing.T) {
	prices := &Prices{ByModel: map[string]float64{"NVIDIA H100 80GB HBM3": 3}, Default: 1}
	example, err := os.ReadFile("testdata/otlp-proto-example-logs.jsonl")
	require.NoError(t, err)
	broken := plog.NewLogs()
	lr := broken.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	rec := sampleRecord("broken", periodStart.Add(time.Hour))
	rec.ToLogRecord(lr)
	lr.Attributes().Remove("gpu_hours_held")
	var m plog.JSONMarshaler
	brokenLine, err := m.MarshalLogs(broken)
	require.NoError(t, err)

	file := fileLine(t, sampleRecord("train", periodStart.Add(3*time.Hour)), sampleRecord("before", periodStart.Add(-time.Minute))) +
		strings.TrimSpace(string(example)) + "\n" +
		"{not json\n" +
		string(brokenLine) + "\n" +
		fileLine(t, sampleRecord("eval", periodStart.Add(time.Hour)), sampleRecord("after", periodStart.Add(24*time.Hour)))
	records, problems, err := ReadJobRecords(strings.NewReader(file), periodStart, periodStart.Add(24*time.Hour), prices)
	require.NoError(t, err)
	require.Len(t, records, 2, "the records that ended in the period, the others skipped")
	assert.Equal(t, "eval", records[0].Job["job_name"], "in the order they ended")
	assert.Equal(t, "train", records[1].Job["job_name"])
	assert.Equal(t, sampleRecord("train", periodStart.Add(3*time.Hour)), records[1].Record, "every field read back")
	require.NotNil(t, records[1].Cost)
	assert.InDelta(t, 2*3+0.5*1, *records[1].Cost, 1e-9, "allocated GPU-hours times each model's price, the default for a model not listed")
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0], "line 3: not an OTLP logs request")
	assert.Contains(t, problems[1], `line 4, record 0: attribute "gpu_hours_held": missing or not a number`)

	records, _, err = ReadJobRecords(strings.NewReader(file), periodStart, periodStart.Add(24*time.Hour), nil)
	require.NoError(t, err)
	assert.Nil(t, records[0].Cost, "no prices, no cost")
}

func TestWriteJobRecords(t *testing.T) {
	dir := t.TempDir()
	cost := 6.5
	r := &Report{
		Start: periodStart, End: periodStart.Add(24 * time.Hour), BucketSeconds: 3600,
		JobRecords: []JobRecord{{Record: sampleRecord("train", periodStart.Add(time.Hour)), Cost: &cost}},
		Prices:     &Prices{Default: 1},
	}
	require.NoError(t, Write(dir, r))
	f, err := os.ReadFile(filepath.Join(dir, FileJobRecords))
	require.NoError(t, err)
	rows, err := csv.NewReader(bytes.NewReader(f)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 2)
	row := map[string]string{}
	for i, h := range rows[0] {
		row[h] = rows[1][i]
	}
	assert.Equal(t, "train", row["job_name"])
	assert.Equal(t, "6.5", row["cost"])
	assert.Equal(t, "2.5", row["gpu_hours_allocated"], "cost next to the GPU-hours it prices")
	assert.Equal(t, "NVIDIA H100 80GB HBM3;Tesla V100", row["gpu_models"])
	assert.Equal(t, "79:1", row["xids"])
	assert.Equal(t, "underused", row["verdict"])
	page, err := os.ReadFile(filepath.Join(dir, FileHTML))
	require.NoError(t, err)
	assert.Contains(t, string(page), "<h2>Ended jobs</h2>")
	assert.Contains(t, string(page), "<td>6.50</td>")
}

// FuzzReadJobRecords: any file gives records and problems, never a panic, and a valid line
// among bad ones is still read.
func FuzzReadJobRecords(f *testing.F) {
	valid := func() string {
		ld := plog.NewLogs()
		rec := sampleRecord("j", periodStart.Add(time.Hour))
		rec.ToLogRecord(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
		var m plog.JSONMarshaler
		b, _ := m.MarshalLogs(ld)
		return string(b)
	}()
	f.Add(valid)
	f.Add(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"gpu.job.record","attributes":[{"key":"gpus","value":{"arrayValue":{"values":[{"intValue":"1"}]}}}]}]}]}]}`)
	example, err := os.ReadFile("testdata/otlp-proto-example-logs.jsonl")
	require.NoError(f, err)
	f.Add(string(example))
	f.Fuzz(func(t *testing.T, line string) {
		if strings.Contains(line, "\n") {
			return
		}
		records, _, err := ReadJobRecords(strings.NewReader(line+"\n"+valid+"\n"), periodStart, periodStart.Add(24*time.Hour), &Prices{Default: 1})
		if err != nil {
			return // a line longer than the scanner's buffer
		}
		found := false
		for i := range records {
			found = found || records[i].Job["job_name"] == "j"
		}
		assert.True(t, found, "the valid line after it is read")
	})
}
