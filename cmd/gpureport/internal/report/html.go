// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"time"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.Must(template.New("report").Funcs(fleetFuncs).Funcs(template.FuncMap{
	"hours": func(h float64) string { return fmt.Sprintf("%.1f", h) },
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f %%", f*100) },
	"util":  func(u float64) string { return fmt.Sprintf("%.0f %%", u) },
	// activity is GPM's, which GPUs older than Hopper lack: a dash there.
	"activity": func(u JSONNum) string {
		if math.IsNaN(float64(u)) {
			return "–"
		}
		return fmt.Sprintf("%.0f %%", float64(u))
	},
	"time":    func(t time.Time) string { return t.UTC().Format("Mon 2 Jan 2006 15:04 UTC") },
	"url":     func(s string) template.URL { return template.URL(s) }, //nolint:gosec // G203: our own PNG data URLs, never outside text
	"money":   func(v *float64) string { return fmt.Sprintf("%.2f", *v) },
	"kwh":     func(j float64) string { return fmt.Sprintf("%.1f", j/3.6e6) },
	"seconds": func(s float64) float64 { return s / 3600 },
	"usageTable": func(title string, job bool, rows []Usage) usageTable {
		return usageTable{Title: title, Job: job, Rows: rows}
	},
}).Parse(pageTemplate)).Parse(fleetTemplate))

type usageTable struct {
	Title string
	Job   bool
	Rows  []Usage
}

type pageData struct {
	*Report
	Charts []*Chart
	// NotableGPUs are the GPUs with anything to look at; the others are only counted.
	NotableGPUs []GPU
	QuietGPUs   int
}

// notable is a GPU that was unavailable or unknown for a while, or had errors.
func notable(g GPU) bool {
	return g.UnavailableHours > 0 || g.UnknownHours > 0 || len(g.XIDs) > 0 || g.ECCSingle > 0 ||
		g.ECCDouble > 0 || g.RetiredPages > 0 || g.RemappedRows > 0 || g.RemapPending || g.RemapFailed
}

// renderHTML writes the page: one file, charts inline, no script and no request to any server.
func renderHTML(r *Report) ([]byte, error) {
	d := pageData{Report: r}
	for i := range r.GPUs {
		g := &r.GPUs[i]
		if notable(*g) {
			d.NotableGPUs = append(d.NotableGPUs, *g)
		} else {
			d.QuietGPUs++
		}
	}
	for _, draw := range []func(*Report) ([]*Chart, error){
		one(jobUtilChart), one(idleByUserChart), nodeHeatMap,
	} {
		charts, err := draw(r)
		if err != nil {
			return nil, fmt.Errorf("chart: %w", err)
		}
		d.Charts = append(d.Charts, charts...)
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func one(f func(*Report) (*Chart, error)) func(*Report) ([]*Chart, error) {
	return func(r *Report) ([]*Chart, error) {
		c, err := f(r)
		if c == nil {
			return nil, err
		}
		return []*Chart{c}, err
	}
}
