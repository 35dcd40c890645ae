// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package report

import (
	"context"
	"encoding/csv"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/fixture"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/promlocal"
	"github.com/otelcol-gpu/otelcol-gpu/deploy/prometheus/rules"
)

// TestFleetHealthOfACleanWeek: a week in which two GPU nodes of two pools report every GPU
// healthy and the health writer judges no fault, recorded by the shipped fleet-health rules: 100 %
// availability, no fault, no repair, no quarantine. The demo's week with faults is
// TestDemoReport's (cmd/gpureport).
func TestFleetHealthOfACleanWeek(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	end := start.Add(week)
	from, to := start.Add(-time.Hour), end.Add(time.Hour)
	const interval = 2 * time.Minute
	dir := t.TempDir()
	om := filepath.Join(dir, "clean.om")
	f, err := os.Create(om)
	require.NoError(t, err)
	w := fixture.NewWriter(f)
	every := func(v float64) func(yield func(int64, float64) bool) {
		return func(yield func(int64, float64) bool) {
			for at := from; at.Before(to); at = at.Add(interval) {
				if !yield(at.UnixMilli(), v) {
					return
				}
			}
		}
	}
	gpus := []fixture.GPU{
		{Node: "node-a", Instance: "10.0.0.1:9102", Minor: 0, UUID: "GPU-a0"},
		{Node: "node-a", Instance: "10.0.0.1:9102", Minor: 1, UUID: "GPU-a1"},
		{Node: "node-b", Instance: "10.0.0.2:9102", Minor: 0, UUID: "GPU-b0"},
	}
	models := map[string]string{"node-a": "NVIDIA A100-SXM4-80GB", "node-b": "NVIDIA H100 80GB HBM3"}
	w.Gauge("gpu_devices_detected", "GPUs the driver enumerates.")
	w.Series(fixture.Labels{"job": fixture.ScrapeJob, "instance": "10.0.0.1:9102", "node_name": "node-a"}, every(2))
	w.Series(fixture.Labels{"job": fixture.ScrapeJob, "instance": "10.0.0.2:9102", "node_name": "node-b"}, every(1))
	w.Gauge("gpu_up", "1 while the GPU answers NVML.")
	for _, g := range gpus {
		w.Series(g.Labels(), every(1))
	}
	w.Gauge("gpu_info", "The GPU's identity.")
	for _, g := range gpus {
		w.Series(g.Labels().With("model", models[g.Node]), every(1))
	}
	w.Gauge("gpu_health", "Health per condition.")
	for _, g := range gpus {
		for _, c := range []string{"nvml", "memory_ecc", "row_remap", "thermal"} {
			w.Series(g.Labels().With("condition", c), every(0))
		}
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	require.NoError(t, promlocal.Backfill(ctx, om, data))
	srv, err := promlocal.Start(ctx, data)
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(rules.FleetHealth, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	srv, err = promlocal.RecordRules(ctx, srv, FleetRules(groups.Groups), from, to, interval)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	client, err := api.NewClient(api.Config{Address: srv.URL})
	require.NoError(t, err)

	o := Options{Start: start, End: end, MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: 6 * time.Hour, NodesPerQuery: 16}
	r, err := Build(ctx, v1.NewAPI(client), o)
	require.NoError(t, err)
	require.Len(t, r.Fleet, 2)
	for i, want := range []struct {
		pool string
		gpus int
	}{{"NVIDIA A100-SXM4-80GB", 2}, {"NVIDIA H100 80GB HBM3", 1}} {
		got := r.Fleet[i]
		assert.Equal(t, want.pool, got.Pool)
		assert.Equal(t, start, got.WeekStart)
		assert.Equal(t, end, got.WeekEnd)
		assert.Equal(t, 1, got.Nodes)
		assert.Equal(t, want.gpus, got.GPUs)
		assert.Zero(t, got.Faults)
		assert.Zero(t, got.UnhealthyHours)
		assert.Zero(t, got.QuarantinedHours)
		assert.Zero(t, got.ValidationHours)
		assert.Zero(t, got.MaxTimeToRepairHours)
		assert.True(t, math.IsNaN(float64(got.MeanTimeToRepairHours)), "no fault, no time to repair")
		assert.True(t, math.IsNaN(float64(got.MeanTimeBetweenFaultsHours)), "no fault, no time between faults")
		assert.Equal(t, 1.0, float64(got.NodeAvailability))
		assert.Equal(t, 1.0, float64(got.GPUAvailability))
		assert.Empty(t, got.Quarantines)
	}

	out := t.TempDir()
	require.NoError(t, Write(out, r))
	cf, err := os.Open(filepath.Join(out, FileFleet))
	require.NoError(t, err)
	defer cf.Close()
	rows, err := csv.NewReader(cf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, []string{
		"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "NVIDIA A100-SXM4-80GB", "1", "2", "0", "0", "0", "0", "", "0", "", "1", "1",
		"0", "0", "0", "0", "0", "0", "0", "0",
	}, rows[1])
	page, err := os.ReadFile(filepath.Join(out, FileHTML))
	require.NoError(t, err)
	assert.Contains(t, string(page), "<h2>Fleet health</h2>")
	assert.Contains(t, string(page), "<td>100.0 %</td><td>100.0 %</td>")
}
