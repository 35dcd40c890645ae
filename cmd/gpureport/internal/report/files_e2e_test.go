// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameNum compares numbers of the charts' series, where NaN (nothing known) equals NaN.
var sameNum = cmp.Comparer(func(a, b JSONNum) bool { return a == b || math.IsNaN(float64(a)) && math.IsNaN(float64(b)) })

// assertFiles reads report.json and the CSV files back: they must hold exactly the report's
// numbers (which the hand computation has checked).
func assertFiles(t *testing.T, dir string, r *Report) {
	js, err := os.ReadFile(filepath.Join(dir, FileJSON))
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	if d := cmp.Diff(*r, back, sameNum); d != "" {
		t.Errorf("report.json differs from the report (-want +got):\n%s", d)
	}

	for _, f := range []struct {
		file string
		rows []Usage
		job  bool
	}{{FileJobs, r.Jobs, true}, {FileUsers, r.Users, false}, {FileVirtualClusters, r.VirtualClusters, false}} {
		records := readCSV(t, filepath.Join(dir, f.file))
		require.Len(t, records, len(f.rows)+1, f.file)
		for i := range f.rows {
			u, rec := &f.rows[i], records[i+1]
			if f.job {
				assert.Equal(t, []string{u.Name, u.Username, u.VirtualCluster}, rec[:3], f.file)
				rec = append(rec[:1:1], rec[3:]...)
			}
			assert.Equal(t, u.Name, rec[0], f.file)
			assert.Equal(t, strconv.Itoa(u.GPUs), rec[1], f.file)
			assert.Equal(t, []float64{
				u.HeldHours, u.UsedHours, u.Efficiency, u.IdleHours, u.IdleHeldHours,
				u.UnknownHours, u.PeakUtil, u.MedianUtil,
			}, floats(t, rec[2:10]), "%s %s", f.file, u.Name)
			// GPM's activity: empty where it was not measured (no Hopper GPU), as null in JSON.
			assert.Equal(t, []string{optNum(u.SMActive), optNum(u.TensorActive), strconv.FormatBool(u.BusyInefficient)}, rec[10:], "%s %s", f.file, u.Name)
		}
	}

	gpus := readCSV(t, filepath.Join(dir, FileGPUs))
	require.Len(t, gpus, len(r.GPUs)+1)
	var xids [][]string
	for i := range r.GPUs {
		g := &r.GPUs[i]
		rec := gpus[i+1]
		assert.Equal(t, []string{g.Node, g.MinorNumber, g.UUID}, rec[:3])
		var n float64
		for _, x := range g.XIDs {
			n += x.Count
			xids = append(xids, []string{g.Node, g.MinorNumber, g.UUID, x.Code, strconv.FormatFloat(x.Count, 'f', -1, 64), x.Resolution, x.Severity, x.Meaning, x.Action})
		}
		assert.Equal(t, []float64{
			g.AvailableHours, g.UnavailableHours, g.UnknownHours, n, g.ECCSingle, g.ECCDouble,
			g.RetiredPages, g.RemappedRows,
		}, floats(t, rec[3:11]), g.UUID)
		assert.Equal(t, []string{strconv.FormatBool(g.RemapPending), strconv.FormatBool(g.RemapFailed)}, rec[11:], g.UUID)
	}
	assert.Equal(t, xids, readCSV(t, filepath.Join(dir, FileXIDs))[1:])
}

func readCSV(t *testing.T, path string) [][]string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err, path)
	return records
}

func floats(t *testing.T, cells []string) []float64 {
	out := make([]float64, len(cells))
	for i, c := range cells {
		f, err := strconv.ParseFloat(c, 64)
		require.NoError(t, err)
		out[i] = f
	}
	return out
}

// assertPageRenders loads index.html in headless Chromium: every chart must decode, the tables
// must show the report, the console must stay free of errors and warnings, and a full-page
// screenshot must come out.
func assertPageRenders(t *testing.T, dir string, r *Report) {
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "the page test needs Debian's chromium (make deps installs it)")
	// One deadline for the browser and everything it does; it ends the browser when it passes.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1200, 900))...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()

	messages := chromedp.Console(ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(dir, FileHTML))), "load the page")
	type image struct {
		Alt           string
		Complete      bool
		Width, Height int
	}
	images, err := chromedp.Run(ctx, chromedp.Evaluate[[]image](
		`[...document.images].map(i => ({Alt: i.alt, Complete: i.complete, Width: i.naturalWidth, Height: i.naturalHeight}))`,
	))
	require.NoError(t, err)
	require.Len(t, images, 4, "job utilization, idle by user, heat map and its scale")
	for i, want := range []string{
		"line chart of GPU utilization per job over time", "bar chart ranking users by idle GPU-hours",
		"heat map of GPU utilization per node over time", "color scale of the heat map, 0 to 100 %",
	} {
		assert.Equal(t, want, images[i].Alt)
		assert.True(t, images[i].Complete && images[i].Width >= 1000 && images[i].Height > 50, "chart %q did not decode: %+v", want, images[i])
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	for _, want := range []string{"alice~train", "bob~infer", "alice~eval", "GPU-a1", "GPU has fallen off the bus", "dev", "prod"} {
		assert.Contains(t, text, want)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr").length`))
	require.NoError(t, err)
	xidRows := 0
	for i := range r.GPUs {
		g := &r.GPUs[i]
		xidRows += len(g.XIDs)
	}
	// A header per table (jobs, users, virtual clusters, GPUs, XIDs) and a row per entry; every
	// GPU of the known data has something to look at.
	assert.Equal(t, 5+len(r.Jobs)+len(r.Users)+len(r.VirtualClusters)+len(r.GPUs)+xidRows, rows)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "screenshot.png"), shot, 0o600))
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	assert.Equal(t, 1200, img.Bounds().Dx())
	assert.Greater(t, img.Bounds().Dy(), 2000, "the full page, charts and tables")

	// The browser delivers console messages in order: everything before this one has arrived
	// once it does.
	const end = "gpureport test: end of page"
	_, err = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`console.debug(`+strconv.Quote(end)+`)`))
	require.NoError(t, err)
	var problems []string
	for m, err := range messages {
		require.NoError(t, err, "console messages")
		if m.Text == end {
			break
		}
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
			problems = append(problems, m.String())
		}
	}
	assert.Empty(t, problems, "console:\n%s", strings.Join(problems, "\n"))
}
