// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command procload measures whole-process cost: CPU seconds and resident memory (anonymous and
// file pages apart: a Go binary's file pages are most of an idle collector) of the agent on
// this machine and on a loaded node (simulated GPUs and a fake host with many containers), next
// to a real node_exporter, all collected and scraped at the same rate for the same time. Each
// collector's own telemetry counts its collections, so a missed one shows.
//
//	go run ./bench/procload -otelcol bin/otelcol-gpu-agent -duration 2m -interval 10s -containers 200
//
// With -memory-limit-mib the loaded agent runs inside a memory cgroup of that limit, created and
// removed here (cgroup v1's memory controller or cgroup v2; needs root): the run fails on an OOM
// kill, an exit or a missed collection, and reports the cgroup's peak.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

type target struct {
	name      string
	cmd       *exec.Cmd
	url       string
	telemetry string // the collector's own metrics; empty for node_exporter
	scraped   points
}

func main() {
	otelcol := flag.String("otelcol", "bin/otelcol-gpu-agent", "collector binary")
	config := flag.String("config", "distro/local.yaml", "collector configuration (its task and gpu receivers are set up here)")
	scenario := flag.String("scenario", "distro/scenarios/dgx-a100-demo.yaml", "the loaded node's simulated GPUs (8 in the default)")
	nodeExporter := flag.String("node-exporter", "prometheus-node-exporter", "node_exporter binary")
	duration := flag.Duration("duration", 2*time.Minute, "how long to run")
	interval := flag.Duration("interval", 10*time.Second, "collection and scrape interval")
	containers := flag.Int("containers", 200, "task containers on the loaded node's fake host")
	limitMiB := flag.Int("memory-limit-mib", 0, "run the loaded agent in a memory cgroup of this limit (0: none)")
	flag.Parse()
	if err := run(*otelcol, *config, *scenario, *nodeExporter, *duration, *interval, *containers, *limitMiB); err != nil {
		fmt.Fprintln(os.Stderr, "procload:", err)
		os.Exit(1)
	}
}

// run starts the processes, measures them and stops them, whatever happens in between.
func run(otelcol, config, scenario, nodeExporter string, duration, interval time.Duration, containers, limitMiB int) error {
	work, err := os.MkdirTemp("", "procload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	host := filepath.Join(work, "host")
	if err := hostfixture.Write(host, hostfixture.Busy(2, containers)); err != nil {
		return err
	}

	var group *memoryCgroup
	if limitMiB > 0 {
		if group, err = newMemoryCgroup(fmt.Sprintf("procload-%d", os.Getpid()), int64(limitMiB)<<20); err != nil {
			return err
		}
		defer group.remove()
	}
	var targets []*target
	defer func() {
		for _, t := range targets {
			_ = syscall.Kill(t.cmd.Process.Pid, syscall.SIGTERM)
			_ = t.cmd.Wait()
		}
	}()
	start := func(name, url string, group *memoryCgroup, bin string, args ...string) *target {
		cmd := exec.Command(bin, args...)
		if group != nil {
			// The shell joins the cgroup before exec, so every page the collector touches is charged.
			cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, group.procs(), bin}, args...)...)
		}
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err == nil {
			err = cmd.Start()
		}
		t := &target{name: name, cmd: cmd, url: url}
		if err == nil {
			targets = append(targets, t)
		}
		return t
	}

	collector := func(name string, group *memoryCgroup, sets ...string) *target {
		port, health, telemetry := freePort(), freePort(), freePort()
		sets = append([]string{
			fmt.Sprintf("exporters::prometheus::endpoint=127.0.0.1:%d", port),
			fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", health),
			"receivers::task::collection_interval=" + interval.String(),
			"receivers::gpu::collection_interval=" + interval.String(),
			"service::telemetry::metrics::level=normal",
			fmt.Sprintf("service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", telemetry),
		}, sets...)
		args := []string{"--config", config}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		t := start(name, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), group, otelcol, args...)
		t.telemetry = fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry)
		return t
	}
	nePort := freePort()
	loaded := fmt.Sprintf("agent, %d containers", containers)
	loadedSets := []string{"receivers::task::root_path=" + host, "processors::gpu_attribution::root_path=" + host}
	if scenario != "" {
		loaded = fmt.Sprintf("agent, GPUs of %s, %d containers", filepath.Base(scenario), containers)
		loadedSets = append(loadedSets, "receivers::gpu::backend=simulated", "receivers::gpu::scenario="+scenario)
	}
	if group != nil {
		loaded += fmt.Sprintf(", in %d MiB", limitMiB)
	}
	collector("agent, this machine", nil)
	collector(loaded, group, loadedSets...)
	start("node_exporter, this machine", fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort), nil, nodeExporter,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort))
	if err != nil {
		return err
	}

	load0, _ := os.ReadFile("/proc/loadavg")
	scrapes := 0
	for end := time.Now().Add(duration); time.Now().Before(end); time.Sleep(interval) {
		for _, t := range targets {
			if t.cmd.ProcessState != nil || !running(t.cmd.Process.Pid) {
				return fmt.Errorf("%s exited during the run", t.name)
			}
			scrapeOnce(t.url)
			if t.telemetry != "" {
				t.scraped.observe(t.telemetry)
			}
		}
		scrapes++
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%d scrapes every %s over %s; load average %s at the start, %s at the end\n", scrapes, interval, duration,
		strings.Join(strings.Fields(string(load0))[:3], " "), strings.Join(strings.Fields(string(load1))[:3], " "))
	fmt.Printf("%-52s %8s %8s %9s %9s %9s %12s\n", "process", "CPU s", "% core", "RSS MiB", "anon MiB", "file MiB", "collections")
	var missed []string
	for _, t := range targets {
		u, err := usage(t.cmd.Process.Pid)
		if err != nil {
			return err
		}
		collections := "-"
		if t.telemetry != "" {
			n := t.scraped.collections()
			collections = strconv.Itoa(n)
			// Between the first and the last observation, one collection an interval, give or take
			// the one the two clocks' phase can move across an end.
			if intervals := t.scraped.observations - 1; intervals < 1 || n < intervals-1 {
				missed = append(missed, fmt.Sprintf("%s: %d collections in %d intervals", t.name, n, intervals))
			}
		}
		fmt.Printf("%-52s %8.2f %8.2f %9.1f %9.1f %9.1f %12s\n", t.name, u.cpuSeconds, 100*u.cpuSeconds/duration.Seconds(),
			u.anonMiB+u.fileMiB, u.anonMiB, u.fileMiB, collections)
	}
	if group != nil {
		peak, oomKills, err := group.stats()
		if err != nil {
			return err
		}
		fmt.Printf("memory cgroup %s: limit %d MiB, peak %.1f MiB, OOM kills %d\n", group.dir, limitMiB, float64(peak)/(1<<20), oomKills)
		if oomKills > 0 {
			return fmt.Errorf("the agent was OOM-killed %d times in its %d MiB cgroup", oomKills, limitMiB)
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("missed collections: %s", strings.Join(missed, "; "))
	}
	return nil
}

// running is false once pid has exited (a zombie, not yet waited for, has exited too).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	return len(fields) > 0 && fields[0] != "Z"
}

func scrapeOnce(url string) []byte {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil // not up yet: the next round scrapes it
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return body
}

// points follows the task receiver's scraped-points counter: each collection adds the same
// number of points on a fixed host, so the counter's growth over its first step counts them.
type points struct {
	first, step, last float64
	observations      int
}

func (p *points) observe(url string) {
	body := scrapeOnce(url)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return
	}
	// The counter is named with or without _total, as the telemetry's translation goes.
	for _, m := range append(families["otelcol_scraper_scraped_metric_points"].GetMetric(), families["otelcol_scraper_scraped_metric_points_total"].GetMetric()...) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "receiver" && l.GetValue() == "task" {
				v := m.GetCounter().GetValue()
				p.observations++
				switch {
				case p.observations == 1:
					p.first, p.last = v, v
				case p.step == 0 && v > p.last:
					p.step, p.last = v-p.last, v
				default:
					p.last = v
				}
			}
		}
	}
}

// collections after the first observation.
func (p *points) collections() int {
	if p.step == 0 {
		return 0
	}
	return int(math.Round((p.last - p.first) / p.step))
}

type processUsage struct{ cpuSeconds, anonMiB, fileMiB float64 }

// usage reads a process's CPU time (user+system) and resident memory from /proc.
func usage(pid int) (processUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return processUsage{}, err
	}
	fields := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	u := processUsage{cpuSeconds: (utime + stime) / 100} // USER_HZ is 100 on Linux
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return processUsage{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), ":")
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		switch key {
		case "RssAnon":
			u.anonMiB = kb / 1024
		case "RssFile":
			u.fileMiB = kb / 1024
		}
	}
	return u, sc.Err()
}

// memoryCgroup is a memory cgroup of its own, v1 (the memory controller's hierarchy) or v2.
type memoryCgroup struct {
	dir string
	v2  bool
}

func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	g := &memoryCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
	limitFile := "memory.limit_in_bytes"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		g = &memoryCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		limitFile = "memory.max"
	} else if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		return nil, errors.New("no memory cgroup controller: neither /sys/fs/cgroup/memory (v1) nor cgroup v2")
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup (needs root): %w", err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		g.remove()
		return nil, err
	}
	if !g.v2 {
		// Without swap accounting the limit holds memory only; with it, keep swap out as well.
		_ = os.WriteFile(filepath.Join(g.dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644)
	}
	return g, nil
}

func (g *memoryCgroup) procs() string { return filepath.Join(g.dir, "cgroup.procs") }

// stats are the cgroup's peak usage and its OOM kills.
func (g *memoryCgroup) stats() (peak int64, oomKills int, err error) {
	peakFile, events, key := "memory.max_usage_in_bytes", "memory.oom_control", "oom_kill"
	if g.v2 {
		peakFile, events = "memory.peak", "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, peakFile))
	if err != nil {
		return 0, 0, err
	}
	peak, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, err
	}
	b, err = os.ReadFile(filepath.Join(g.dir, events))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			oomKills, _ = strconv.Atoi(v)
		}
	}
	return peak, oomKills, nil
}

// remove deletes the cgroup once its processes are gone (they are stopped before this runs).
func (g *memoryCgroup) remove() {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := os.Remove(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "procload: cgroup %s not removed: %v\n", g.dir, err)
			return
		}
	}
}

func freePort() int {
	port, err := loopback.FreePort()
	check(err)
	return port
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
