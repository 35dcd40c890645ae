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
// -baseline runs a second collector binary (say, one built from an older commit) the same two
// ways in the same run, so that a table shows before and after under the same load. Each
// collector runs from a copy of its binary dropped from the page cache, so that their file
// pages compare. -env sets a variable in the collectors' environment, as a DaemonSet would
// (GOMEMLIMIT, GOGC).
//
// With -memory-limit-mib each loaded agent runs inside a memory cgroup of that limit, created and
// removed here (cgroup v1's memory controller or cgroup v2; needs root), where the binary's pages
// are charged as on a node: the run fails on an OOM kill, an exit or a missed collection, and
// reports the cgroup's peak.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
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
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
)

type options struct {
	otelcol, baseline, config, baselineConfig, scenario, nodeExporter string
	env                                                               []string
	duration, interval                                                time.Duration
	containers, limitMiB                                              int
}

type target struct {
	name      string
	cmd       *exec.Cmd
	url       string
	telemetry string        // the collector's own metrics; empty for node_exporter
	group     *memoryCgroup // the cgroup it runs in, if any
	scraped   points
}

// envFlag collects repeated -env KEY=VALUE flags.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

func main() {
	var o options
	var env envFlag
	flag.StringVar(&o.otelcol, "otelcol", "bin/otelcol-gpu-agent", "collector binary")
	flag.StringVar(&o.baseline, "baseline", "", "a second collector binary run the same ways beside -otelcol (e.g. built from an older commit)")
	flag.StringVar(&o.config, "config", "distro/local.yaml", "collector configuration (its task and gpu receivers are set up here)")
	flag.StringVar(&o.baselineConfig, "baseline-config", "", "the baseline's configuration, when the baseline cannot read -config (e.g. the same file at the baseline's commit); default -config")
	flag.StringVar(&o.scenario, "scenario", "distro/scenarios/dgx-a100-demo.yaml", "the loaded node's simulated GPUs (8 in the default)")
	flag.StringVar(&o.nodeExporter, "node-exporter", "prometheus-node-exporter", "node_exporter binary")
	flag.Var(&env, "env", "KEY=VALUE in the collectors' environment, e.g. GOMEMLIMIT=64MiB (repeatable)")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "how long to run")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "collection and scrape interval")
	flag.IntVar(&o.containers, "containers", 200, "task containers on the loaded node's fake host")
	flag.IntVar(&o.limitMiB, "memory-limit-mib", 0, "run each loaded agent in a memory cgroup of this limit (0: none)")
	flag.Parse()
	o.env = env
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "procload:", err)
		os.Exit(1)
	}
}

// pageExporter names the configuration's Prometheus page exporter: prometheus_page, or the
// contrib prometheus exporter that a configuration older than prometheus_page serves with.
func pageExporter(config string) (string, error) {
	raw, err := os.ReadFile(config)
	if err != nil {
		return "", err
	}
	var c struct {
		Exporters map[string]any `yaml:"exporters"`
	}
	if err = yaml.Unmarshal(raw, &c); err != nil {
		return "", fmt.Errorf("%s: %w", config, err)
	}
	for _, name := range []string{"prometheus_page", "prometheus"} {
		if _, ok := c.Exporters[name]; ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s: exporters has neither prometheus_page nor prometheus", config)
}

// run starts the processes, measures them and stops them, whatever happens in between.
func run(o options) error {
	work, err := os.MkdirTemp("", "procload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	host := filepath.Join(work, "host")
	err = hostfixture.Write(host, hostfixture.Busy(2, o.containers))
	if err != nil {
		return err
	}

	var targets []*target
	defer func() {
		for _, t := range targets {
			_ = syscall.Kill(t.cmd.Process.Pid, syscall.SIGTERM)
			_ = t.cmd.Wait()
			if t.group != nil {
				t.group.remove()
			}
		}
	}()
	start := func(t *target, env []string, bin string, args ...string) {
		if err != nil {
			return
		}
		t.cmd = exec.Command(bin, args...)
		if t.group != nil {
			// The shell joins the cgroup before exec, so every page the collector touches is charged.
			t.cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, t.group.procs(), bin}, args...)...) //nolint:gosec // G204: the script is a constant; it runs the collector binaries given by the flags
		}
		t.cmd.Env = append(os.Environ(), env...)
		t.cmd.Stdout, t.cmd.Stderr = io.Discard, io.Discard
		if err = t.cmd.Start(); err == nil {
			targets = append(targets, t)
		} else if t.group != nil {
			t.group.remove()
		}
	}
	collector := func(name, bin, config string, limitMiB int, sets ...string) {
		if err != nil {
			return
		}
		var exporter string
		if exporter, err = pageExporter(config); err != nil {
			return
		}
		t := &target{name: name}
		if bin, err = uncachedCopy(bin, filepath.Join(work, fmt.Sprintf("otelcol-%d", len(targets)))); err != nil {
			return
		}
		if limitMiB > 0 {
			if t.group, err = newMemoryCgroup(fmt.Sprintf("procload-%d-%d", os.Getpid(), len(targets)), int64(limitMiB)<<20); err != nil {
				return
			}
		}
		port, health, telemetry := freePort(), freePort(), freePort()
		sets = append([]string{
			fmt.Sprintf("exporters::%s::endpoint=127.0.0.1:%d", exporter, port),
			fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", health),
			"receivers::task::collection_interval=" + o.interval.String(),
			"receivers::gpu::collection_interval=" + o.interval.String(),
			"service::telemetry::metrics::level=normal",
			fmt.Sprintf("service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", telemetry),
		}, sets...)
		args := []string{"--config", config}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		t.url = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		t.telemetry = fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry)
		start(t, o.env, bin, args...)
	}

	loaded := fmt.Sprintf("%d containers", o.containers)
	loadedSets := []string{"receivers::task::root_path=" + host, "processors::gpu_attribution::root_path=" + host}
	if o.scenario != "" {
		loaded = fmt.Sprintf("GPUs of %s, %d containers", filepath.Base(o.scenario), o.containers)
		loadedSets = append(loadedSets, "receivers::gpu::backend=simulated", "receivers::gpu::scenario="+o.scenario)
	}
	if o.limitMiB > 0 {
		loaded += fmt.Sprintf(", in %d MiB", o.limitMiB)
	}
	type agent struct{ label, bin, config string }
	agents := []agent{{"agent", o.otelcol, o.config}}
	if o.baseline != "" {
		agents = append(agents, agent{"baseline", o.baseline, cmp.Or(o.baselineConfig, o.config)})
	}
	for _, a := range agents {
		collector(a.label+", this machine", a.bin, a.config, 0)
		collector(a.label+", "+loaded, a.bin, a.config, o.limitMiB, loadedSets...)
	}
	nePort := freePort()
	start(&target{name: "node_exporter, this machine", url: fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort)}, nil,
		o.nodeExporter, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort))
	if err != nil {
		return err
	}

	load0, _ := os.ReadFile("/proc/loadavg")
	scrapes := 0
	for end := time.Now().Add(o.duration); time.Now().Before(end); time.Sleep(o.interval) {
		for _, t := range targets {
			if t.cmd.ProcessState != nil || !running(t.cmd.Process.Pid) {
				if t.group != nil {
					if _, oomKills, err := t.group.stats(); err == nil && oomKills > 0 {
						return fmt.Errorf("%s was OOM-killed in its %d MiB cgroup", t.name, o.limitMiB)
					}
				}
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
	fmt.Printf("%d scrapes every %s over %s; load average %s at the start, %s at the end\n", scrapes, o.interval, o.duration,
		strings.Join(strings.Fields(string(load0))[:3], " "), strings.Join(strings.Fields(string(load1))[:3], " "))
	fmt.Printf("agents: %s", o.otelcol)
	if o.baseline != "" {
		fmt.Printf(", baseline: %s", o.baseline)
	}
	if len(o.env) > 0 {
		fmt.Printf(", environment: %s", strings.Join(o.env, " "))
	}
	fmt.Println()
	fmt.Printf("%-62s %8s %8s %9s %9s %9s %12s\n", "process", "CPU s", "% core", "RSS MiB", "anon MiB", "file MiB", "collections")
	var failures []string
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
				failures = append(failures, fmt.Sprintf("%s: %d collections in %d intervals", t.name, n, intervals))
			}
		}
		fmt.Printf("%-62s %8.2f %8.2f %9.1f %9.1f %9.1f %12s\n", t.name, u.cpuSeconds, 100*u.cpuSeconds/o.duration.Seconds(),
			u.anonMiB+u.fileMiB, u.anonMiB, u.fileMiB, collections)
	}
	for _, t := range targets {
		if t.group == nil {
			continue
		}
		peak, oomKills, err := t.group.stats()
		if err != nil {
			return err
		}
		fmt.Printf("%s: memory cgroup %s, limit %d MiB, peak %.1f MiB, OOM kills %d\n", t.name, t.group.dir, o.limitMiB, float64(peak)/(1<<20), oomKills)
		if oomKills > 0 {
			failures = append(failures, fmt.Sprintf("%s was OOM-killed %d times in its %d MiB cgroup", t.name, oomKills, o.limitMiB))
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
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

// uncachedCopy copies the binary to dst and drops the copy's pages from the page cache, so that
// the pages the collector maps are read in by it, as on a node that starts the agent for the
// first time: how many of a binary's pages are resident depends on how they came into the cache
// (a file read whole, as a build or a copy leaves it, can be mapped whole), and a page already
// cached stays charged to the cgroup of whoever read it.
func uncachedCopy(src, dst string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil { // dirty pages cannot be dropped
		return "", err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return "", err
	}
	return dst, f.Close()
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
	if err := os.WriteFile(filepath.Join(g.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o600); err != nil {
		g.remove()
		return nil, err
	}
	if !g.v2 {
		// Without swap accounting the limit holds memory only; with it, keep swap out as well.
		_ = os.WriteFile(filepath.Join(g.dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o600)
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
	for line := range strings.SplitSeq(string(b), "\n") {
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
