// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e runs the built collector (OTELCOL_BIN, set by `make e2e`) against fixture hosts
// and real peers: node_exporter and a Prometheus server, each started on free loopback ports
// and stopped by the test.
package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

func repoRoot(testing.TB) string { return stack.RepoRoot() }

// requireTool finds a real peer's binary; its absence fails the test, it is not a skip.
func requireTool(tb testing.TB, name string) string {
	path, err := exec.LookPath(name)
	require.NoError(tb, err, "%s is needed by this test: run `make deps` (Debian packages prometheus, prometheus-node-exporter)", name)
	return path
}

// startProcess runs a peer; it is killed by PID when the test ends, and its output is shown
// if the test failed.
func startProcess(tb testing.TB, bin string, args ...string) *stack.Process {
	tb.Helper()
	return stack.Start(tb, bin, args, nil)
}

// startCollector runs the collector on config (with the distribution that runs it, see
// stack.BinaryFor) with --set overrides, and returns its metrics URL.
func startCollector(tb testing.TB, config string, sets ...string) string {
	url, _ := startCollectorWithOutput(tb, config, sets...)
	return url
}

// startCollectorWithOutput also returns the collector's console output.
func startCollectorWithOutput(tb testing.TB, config string, sets ...string) (string, *stack.Process) {
	tb.Helper()
	port := stack.FreePort(tb)
	args := []string{
		"--config", config,
		"--set", fmt.Sprintf("exporters::prometheus_page::endpoint=127.0.0.1:%d", port),
		"--set", fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", stack.FreePort(tb)),
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out := startProcess(tb, stack.BinaryFor(tb, config), args...)
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", port), out
}

// eventually polls cond until it holds or a minute passes.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	poll.Until(tb, time.Minute, what, cond)
}

func httpGet(url string) ([]byte, error) { return stack.Get(url, 10*time.Second) }

// scrape fetches and parses a Prometheus text endpoint.
func scrape(url string) (map[string]*dto.MetricFamily, []byte, error) {
	body, err := httpGet(url)
	if err != nil {
		return nil, nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	return families, body, err
}

// iterations reads collector_iteration_count_total{name="task"}, 0 if absent.
func iterations(families map[string]*dto.MetricFamily) float64 {
	f := families["collector_iteration_count_total"]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == "task" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitForCollections scrapes url until the task receiver has collected n times. The exporter
// takes a collection in series by series and may serve a page in between: a test that reads the
// nth collection whole waits for n+1.
func waitForCollections(tb testing.TB, url string, n float64) map[string]*dto.MetricFamily {
	tb.Helper()
	var families map[string]*dto.MetricFamily
	eventually(tb, fmt.Sprintf("%d collections at %s", int(n), url), func() bool {
		f, _, err := scrape(url)
		families = f
		return err == nil && iterations(f) >= n
	})
	return families
}

func labelsOf(m *dto.Metric, drop ...string) string {
	var parts []string
	for _, l := range m.GetLabel() {
		skip := false
		for _, d := range drop {
			skip = skip || l.GetName() == d
		}
		if !skip {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
	}
	return strings.Join(parts, ",")
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}
