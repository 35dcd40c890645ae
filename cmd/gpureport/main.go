// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpureport writes a GPU efficiency report for a period from a Prometheus-compatible
// API: who held GPUs, who used them and who idled, per job, user and virtual cluster, and how
// available each GPU was and which errors it had. It writes report.json, CSV files and a
// self-contained index.html with charts.
//
// With -demo it needs no server: it generates a week of a small demo cluster, backfills it into
// a private Prometheus with promtool, and reports on that.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/demo"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/promlocal"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stderr, time.Now())
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpureport:", err)
		os.Exit(1)
	}
}

type config struct {
	prometheus string
	demo       bool
	out        string
	start, end string
	period     time.Duration
	timeout    time.Duration
	opts       report.Options
	// jobRecords is the job_record connector's file; prices the rules file with the prices.
	jobRecords, prices string
}

func parseFlags(args []string, stderr io.Writer, now time.Time) (config, error) {
	var c config
	fs := flag.NewFlagSet("gpureport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.prometheus, "prometheus", "", "base URL of the Prometheus HTTP API (default $PROM_URL unless -demo)")
	fs.BoolVar(&c.demo, "demo", false, "report on a generated week of a demo cluster in a private Prometheus (needs prometheus and promtool)")
	fs.StringVar(&c.out, "out", "report", "directory to write index.html, report.json and the CSV files to")
	fs.StringVar(&c.start, "start", "", "start of the period, RFC 3339 (default: end - period)")
	fs.StringVar(&c.end, "end", "", "end of the period, RFC 3339 (default: now, to the hour)")
	fs.DurationVar(&c.period, "period", 7*24*time.Hour, "length of the period when -start is not given")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "deadline for the whole report")
	fs.DurationVar(&c.opts.MaxGap, "max-gap", 5*time.Minute, "longest interval between two samples that still counts as known time; longer gaps are unknown")
	fs.Float64Var(&c.opts.IdleBelow, "idle-below", 10, "utilization (%) below which a held GPU counts as idle")
	fs.Float64Var(&c.opts.IdleHeldUtilBelow, "idle-held-utilization-below", 1, "utilization (%) below which a GPU with framebuffer memory in use counts as idle-held")
	fs.Float64Var(&c.opts.IdleHeldMemoryAtLeast, "idle-held-memory-at-least", 1, "framebuffer use (%) from which an idle GPU counts as idle-held")
	fs.Float64Var(&c.opts.BusyAtLeast, "busy-at-least", 80, "efficiency (%) from which a job with low SM activity is busy but inefficient")
	fs.Float64Var(&c.opts.LowSMBelow, "low-sm-active-below", 30, "SM activity (%, GPM: Hopper and newer) below which a busy job is busy but inefficient")
	fs.DurationVar(&c.opts.Bucket, "bucket", time.Hour, "time resolution of the charts")
	fs.DurationVar(&c.opts.Chunk, "chunk", 6*time.Hour, "time range of one query for raw samples (bounds the size of an answer)")
	fs.StringVar(&c.jobRecords, "job-records", "", "the gateway's file of ended jobs' records (file/job_records, JSON lines) to list the jobs that ended in the period")
	fs.StringVar(&c.prices, "prices", "", "rules file with the prices per GPU-hour (deploy/prometheus/rules/job-cost.yaml) to cost each job record")
	fs.IntVar(&c.opts.NodesPerQuery, "nodes-per-query", 16, "nodes whose raw samples are read and held at a time (bounds memory)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !c.demo && c.prometheus == "" {
		c.prometheus = os.Getenv("PROM_URL")
	}
	if c.demo == (c.prometheus != "") {
		return c, errors.New("-prometheus (or PROM_URL) or -demo: give one of them")
	}
	end := now.UTC().Truncate(time.Hour)
	if c.end != "" {
		t, err := time.Parse(time.RFC3339, c.end)
		if err != nil {
			return c, fmt.Errorf("-end: %w", err)
		}
		end = t
	}
	start := end.Add(-c.period)
	if c.start != "" {
		t, err := time.Parse(time.RFC3339, c.start)
		if err != nil {
			return c, fmt.Errorf("-start: %w", err)
		}
		start = t
	}
	c.opts.Start, c.opts.End = start, end
	return c, c.opts.Validate()
}

func run(ctx context.Context, args []string, stderr io.Writer, now time.Time) error {
	c, err := parseFlags(args, stderr, now)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	url := c.prometheus
	if c.demo {
		srv, cleanup, demoErr := startDemo(ctx, c.opts.End, stderr)
		if demoErr != nil {
			return demoErr
		}
		defer cleanup()
		url = srv.URL
	}
	client, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return fmt.Errorf("-prometheus %q: %w", url, err)
	}
	r, err := report.Build(ctx, v1.NewAPI(client), c.opts)
	if err != nil {
		return err
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(stderr, "gpureport: warning from the server:", w)
	}
	if err := addJobRecords(r, c.jobRecords, c.prices, stderr); err != nil {
		return err
	}
	if err := report.Write(c.out, r); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gpureport: %s to %s: %d jobs, %d users, %d GPUs; wrote %s\n",
		c.opts.Start.Format(time.RFC3339), c.opts.End.Format(time.RFC3339),
		len(r.Jobs), len(r.Users), len(r.GPUs), filepath.Join(c.out, report.FileHTML))
	return nil
}

// startDemo backfills the demo week ending at end into a private Prometheus under a temporary
// directory; cleanup stops it and removes the directory.
func startDemo(ctx context.Context, end time.Time, stderr io.Writer) (*promlocal.Server, func(), error) {
	dir, err := os.MkdirTemp("", "gpureport-demo-")
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*promlocal.Server, func(), error) {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "gpureport: generating a demo week ending %s and backfilling it with promtool\n", end.Format(time.RFC3339))
	om := filepath.Join(dir, "demo.om")
	f, err := os.Create(om)
	if err != nil {
		return fail(err)
	}
	if err = errors.Join(demo.Write(f, end), f.Close()); err != nil {
		return fail(fmt.Errorf("demo data: %w", err))
	}
	data := filepath.Join(dir, "data")
	if err = promlocal.Backfill(ctx, om, data); err != nil {
		return fail(err)
	}
	srv, err := promlocal.Start(ctx, data)
	if err != nil {
		return fail(err)
	}
	if srv, err = recordFleetHealth(ctx, srv, end); err != nil {
		return fail(err)
	}
	return srv, func() { srv.Stop(); os.RemoveAll(dir) }, nil
}
