// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command procload measures whole-process cost: CPU seconds and resident memory of the
// collector (on this machine, and on a fake host with many containers) next to a real
// node_exporter, all scraped at the same rate for the same time.
//
//	go run ./bench/procload -otelcol bin/otelcol-gpu -duration 2m -interval 10s -containers 500
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

type target struct {
	name string
	cmd  *exec.Cmd
	url  string
}

func main() {
	otelcol := flag.String("otelcol", "bin/otelcol-gpu", "collector binary")
	config := flag.String("config", "distro/local.yaml", "collector configuration")
	nodeExporter := flag.String("node-exporter", "prometheus-node-exporter", "node_exporter binary")
	duration := flag.Duration("duration", 2*time.Minute, "how long to run")
	interval := flag.Duration("interval", 10*time.Second, "collection and scrape interval")
	containers := flag.Int("containers", 500, "containers on the fake host")
	flag.Parse()

	work, err := os.MkdirTemp("", "procload")
	check(err)
	defer os.RemoveAll(work)
	host := filepath.Join(work, "host")
	check(hostfixture.Write(host, hostfixture.Busy(2, *containers)))

	collector := func(name string, sets ...string) *target {
		port, health := freePort(), freePort()
		args := []string{"--config", *config,
			"--set", fmt.Sprintf("exporters::prometheus::endpoint=127.0.0.1:%d", port),
			"--set", fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", health),
			"--set", "receivers::task::collection_interval=" + interval.String()}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		return start(name, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), *otelcol, args...)
	}
	nePort := freePort()
	targets := []*target{
		collector("otelcol-gpu, this machine"),
		collector(fmt.Sprintf("otelcol-gpu, %d containers", *containers), "receivers::task::root_path="+host),
		start("node_exporter, this machine", fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort), *nodeExporter,
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort)),
	}
	defer func() {
		for _, t := range targets {
			_ = syscall.Kill(t.cmd.Process.Pid, syscall.SIGTERM)
			_ = t.cmd.Wait()
		}
	}()

	scrapes := 0
	for end := time.Now().Add(*duration); time.Now().Before(end); time.Sleep(*interval) {
		for _, t := range targets {
			scrapeOnce(t.url)
		}
		scrapes++
	}
	fmt.Printf("%d scrapes every %s over %s\n", scrapes, interval, duration)
	fmt.Printf("%-36s %12s %12s\n", "process", "CPU seconds", "RSS MiB")
	for _, t := range targets {
		cpu, rss := usage(t.cmd.Process.Pid)
		fmt.Printf("%-36s %12.2f %12.1f\n", t.name, cpu, rss)
	}
}

func start(name, url, bin string, args ...string) *target {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	check(cmd.Start())
	return &target{name: name, cmd: cmd, url: url}
}

func scrapeOnce(url string) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return // not up yet: the next round scrapes it
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// usage reads a process's CPU time (user+system) and resident memory from /proc.
func usage(pid int) (cpuSeconds, rssMiB float64) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	fields := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			rssMiB = kb / 1024
		}
	}
	return (utime + stime) / 100, rssMiB // USER_HZ is 100 on Linux
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
