// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
)

// volatile are the series whose values depend on the machine or on how many collections ran,
// left out of the comparison as node_exporter's end-to-end test leaves out its own.
var volatile = regexp.MustCompile(`^(node_filesystem_(avail|size)_bytes|collector_iteration_count_total|collector_read_errors_total)\{`)

// TestFixtureHosts runs the binary with distro/local.yaml on each fixture host and compares
// the whole /metrics page with the checked-in expectation (-update rewrites it).
func TestFixtureHosts(t *testing.T) {
	root := repoRoot(t)
	for _, host := range []string{"v1-cgroupfs-docker", "v1-systemd-containerd", "v2-systemd-crio"} {
		t.Run(host, func(t *testing.T) {
			url := startCollector(t, filepath.Join(root, "distro", "local.yaml"),
				"receivers::task::root_path="+filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", host),
				"receivers::task::node_name=gpu-node-07",
				"receivers::task::collection_interval=200ms",
				"receivers::task::service_namespaces=[pai]",
				// The page is the fixture host's alone, whatever GPUs the test machine has.
				"service::pipelines::metrics::receivers=[task]",
			)
			// From the second collection on, rates are there (0 on a still fixture).
			waitForCollections(t, url, 2)
			_, body, err := scrape(url)
			require.NoError(t, err)
			got := stable(string(body))

			goldentest.Text(t, filepath.Join("testdata", host+".metrics"), got)
			lint(t, body)
		})
	}
}

// contractLintExceptions are the promtool complaints the metric contract imposes: node_exporter's
// and OpenPAI's names, which dashboards query, are kept as they are.
var contractLintExceptions = map[string]bool{
	"node_memory_MemAvailable_bytes metric names should be written in 'snake_case' not 'camelCase'":         true,
	"node_memory_MemFree_bytes metric names should be written in 'snake_case' not 'camelCase'":              true,
	"node_memory_MemTotal_bytes metric names should be written in 'snake_case' not 'camelCase'":             true,
	`zombie_process_count non-histogram and non-summary metrics should not have "_count" suffix`:            true,
	`collector_iteration_count_total non-histogram and non-summary metrics should not have "_count" suffix`: true,
	// OpenPAI's GPU names (the AMD demo's page).
	`configured_gpu_count non-histogram and non-summary metrics should not have "_count" suffix`:               true,
	`gpu_used_by_external_process_count non-histogram and non-summary metrics should not have "_count" suffix`: true,
	`gpu_used_by_zombie_container_count non-histogram and non-summary metrics should not have "_count" suffix`: true,
	`zombie_container_count non-histogram and non-summary metrics should not have "_count" suffix`:             true,
}

// lint runs promtool's metric linter on a page: anything it finds beyond the contract's own
// names is a defect of ours.
func lint(t *testing.T, page []byte) {
	cmd := exec.Command(requireTool(t, "promtool"), "check", "metrics")
	cmd.Stdin = bytes.NewReader(page)
	out, _ := cmd.CombinedOutput() // exit status 3 means "lint problems": judged below
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !contractLintExceptions[line] {
			t.Errorf("promtool: %s", line)
		}
	}
}

// stable drops the volatile series' sample lines, keeping their HELP and TYPE lines.
func stable(page string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(page, "\n") {
		if !volatile.MatchString(line) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if goldentest.Updating() {
		fmt.Println("expected pages rewritten: review them with git diff")
	}
	os.Exit(code)
}
