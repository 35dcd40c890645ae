// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// Chart is one rendered chart: a PNG as a data URL, so that the page needs no other file.
type Chart struct {
	Title, Alt string
	DataURL    string
}

const (
	chartWidth = 11 * vg.Inch
	topJobs    = 8
	topUsers   = 15
)

// pngDataURL renders p as a PNG of the page's width (chartWidth) and height h.
func pngDataURL(p *plot.Plot, h vg.Length) (string, error) {
	wt, err := p.WriterTo(chartWidth, h, "png")
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// newPlot is a plot in the page's sans-serif type (gonum's default is serif).
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	sans := font.Font{Typeface: "Liberation", Variant: "Sans"}
	for _, st := range []*text.Style{
		&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle,
	} {
		st.Font.Typeface, st.Font.Variant = sans.Typeface, sans.Variant
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

func timeAxis(p *plot.Plot) {
	p.X.Tick.Marker = calendarTicks{}
	p.X.Label.Text = "UTC"
}

// calendarTicks marks days (or hours, for short periods) at round UTC times.
type calendarTicks struct{}

func (calendarTicks) Ticks(lo, hi float64) []plot.Tick {
	major, minor, format := 24*time.Hour, 6*time.Hour, "Mon 2 Jan"
	switch span := time.Duration(hi-lo) * time.Second; {
	case span < 12*time.Hour:
		major, minor, format = time.Hour, 15*time.Minute, "15:04"
	case span < 48*time.Hour:
		major, minor, format = 6*time.Hour, time.Hour, "Jan 2 15:04"
	}
	var ticks []plot.Tick
	for t := time.Unix(int64(lo), 0).UTC().Truncate(minor); float64(t.Unix()) <= hi; t = t.Add(minor) {
		if float64(t.Unix()) < lo {
			continue
		}
		tick := plot.Tick{Value: float64(t.Unix())}
		if t.Truncate(major).Equal(t) {
			tick.Label = t.Format(format)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// bucketTime is the middle of bucket i, in Unix seconds.
func (r *Report) bucketTime(i int) float64 {
	return float64(r.Start.Unix()) + (float64(i)+0.5)*r.BucketSeconds
}

// jobUtilChart draws the hourly utilization of the jobs that held the most GPU-hours; a line
// breaks where nothing is known.
func jobUtilChart(r *Report) (*Chart, error) {
	if len(r.JobUtil) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("GPU utilization per job (mean per %s, the %d jobs holding most GPU-hours)", bucketName(r), min(topJobs, len(r.JobUtil))))
	p.Y.Label.Text = "utilization %"
	// Room above 100 % for the legend.
	p.Y.Min, p.Y.Max = 0, 100+3*float64(min(topJobs, len(r.JobUtil)))
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}})
	p.Legend.Top = true
	timeAxis(p)
	p.Add(plotter.NewGrid())
	for i, s := range r.JobUtil[:min(topJobs, len(r.JobUtil))] {
		var legendLine *plotter.Line
		for _, run := range knownRuns(r, s.Values) {
			l, err := plotter.NewLine(run)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			p.Add(l)
			if legendLine == nil {
				legendLine = l
			}
		}
		if legendLine != nil {
			p.Legend.Add(s.Name, legendLine)
		}
	}
	url, err := pngDataURL(p, 5.5*vg.Inch)
	if err != nil {
		return nil, err
	}
	return &Chart{Title: "Utilization over time per job", Alt: "line chart of GPU utilization per job over time", DataURL: url}, nil
}

// knownRuns splits a bucket series at unknown buckets.
func knownRuns(r *Report, values []JSONNum) []plotter.XYs {
	var runs []plotter.XYs
	var cur plotter.XYs
	for i, v := range values {
		if math.IsNaN(float64(v)) {
			if len(cur) > 0 {
				runs = append(runs, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: r.bucketTime(i), Y: float64(v)})
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs
}

// idleByUserChart ranks users by idle GPU-hours.
func idleByUserChart(r *Report) (*Chart, error) {
	users := make([]Usage, 0, len(r.Users))
	for i := range r.Users {
		if r.Users[i].IdleHours > 0 {
			users = append(users, r.Users[i])
		}
	}
	if len(users) == 0 {
		return nil, nil
	}
	sortUsages(users, func(u Usage) float64 { return u.IdleHours })
	users = users[:min(topUsers, len(users))]
	// Bars are drawn bottom up: the most idle user goes last, on top.
	idle, idleHeld := make(plotter.Values, len(users)), make(plotter.Values, len(users))
	names := make([]string, len(users))
	for i := range users {
		j, u := len(users)-1-i, &users[i]
		idle[j], idleHeld[j], names[j] = u.IdleHours, u.IdleHeldHours, u.Name
	}
	p := newPlot(fmt.Sprintf("Idle GPU-hours by user (utilization below %g %%)", r.Options.IdleBelow))
	p.X.Label.Text = "GPU-hours"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	width := vg.Points(9)
	for k, bars := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{
		{"idle", idle, color.RGBA{R: 0xd6, G: 0x60, B: 0x4d, A: 0xff}},
		{"of which idle-held (framebuffer in use)", idleHeld, color.RGBA{R: 0x43, G: 0x93, B: 0xc3, A: 0xff}},
	} {
		b, err := plotter.NewBarChart(bars.v, width)
		if err != nil {
			return nil, err
		}
		b.Horizontal = true
		b.Color = bars.c
		b.LineStyle.Width = 0
		b.Offset = vg.Length(k*2-1) * width / 2
		p.Add(b)
		p.Legend.Add(bars.name, b)
	}
	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, 1.5*users[0].IdleHours // room on the right for the legend
	url, err := pngDataURL(p, vg.Length(1.4+0.3*float64(len(users)))*vg.Inch)
	if err != nil {
		return nil, err
	}
	return &Chart{Title: "Idle GPU-hours by user", Alt: "bar chart ranking users by idle GPU-hours", DataURL: url}, nil
}

// nodeGrid is the heat map's grid: one row per node, one column per time bucket.
type nodeGrid struct{ r *Report }

func (g nodeGrid) Dims() (c, r int)   { return len(g.r.NodeUtil[0].Values), len(g.r.NodeUtil) }
func (g nodeGrid) Z(c, r int) float64 { return float64(g.r.NodeUtil[r].Values[c]) }
func (g nodeGrid) X(c int) float64    { return g.r.bucketTime(c) }
func (nodeGrid) Y(r int) float64      { return float64(r) }

// nodeHeatMap shows every node's mean GPU utilization per bucket, and its color scale.
func nodeHeatMap(r *Report) ([]*Chart, error) {
	if len(r.NodeUtil) == 0 || len(r.NodeUtil[0].Values) == 0 {
		return nil, nil
	}
	cm := moreland.SmoothBlueRed()
	cm.SetMin(0)
	cm.SetMax(100)
	h := plotter.NewHeatMap(nodeGrid{r}, cm.Palette(101))
	h.Min, h.Max = 0, 100
	h.NaN = color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
	p := newPlot(fmt.Sprintf("GPU utilization per node (mean of its GPUs per %s; grey: unknown)", bucketName(r)))
	timeAxis(p)
	p.Add(h)
	names := make([]string, len(r.NodeUtil))
	for i, n := range r.NodeUtil {
		names[i] = n.Name
	}
	p.NominalY(names...)
	heat, err := pngDataURL(p, vg.Length(1.4+0.28*float64(len(names)))*vg.Inch)
	if err != nil {
		return nil, err
	}
	scale := newPlot("")
	scale.HideY()
	scale.X.Label.Text = "utilization %"
	scale.Add(&plotter.ColorBar{ColorMap: cm})
	bar, err := pngDataURL(scale, 0.8*vg.Inch)
	if err != nil {
		return nil, err
	}
	return []*Chart{
		{Title: "GPU utilization per node over the period", Alt: "heat map of GPU utilization per node over time", DataURL: heat},
		{Alt: "color scale of the heat map, 0 to 100 %", DataURL: bar},
	}, nil
}

func bucketName(r *Report) string {
	d := time.Duration(r.BucketSeconds * float64(time.Second))
	if d == time.Hour {
		return "hour"
	}
	return d.String()
}
