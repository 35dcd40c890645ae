// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = "# The contract\n" +
	"\n" +
	"| label | meaning |\n" +
	"|---|---|\n" +
	"| `node_name` | not a metric: this table is not the contract's |\n" +
	"\n" +
	"## Node\n" +
	"\n" +
	"| metric | type | labels | meaning | from |\n" +
	"|---|---|---|---|---|\n" +
	"| `node_memory_MemTotal_bytes`, `node_memory_MemFree_bytes` | gauge | — | as node_exporter | `task` |\n" +
	"| `collector_iteration_count_total` | counter | `name` (`gpu`\\|`task`) | one per collection | `gpu`, `task` |\n" +
	"\n" +
	"## AMD GPUs (planned)\n" +
	"\n" +
	"### Latency\n" +
	"\n" +
	"```yaml\n" +
	"# a comment, not a heading: the section stays planned\n" +
	"```\n" +
	"\n" +
	"| metric | type | labels | meaning | from |\n" +
	"|:--|:--|:--|:--|:--|\n" +
	"| `cmd_rocm_smi_latency_seconds` | histogram | `le` | latency of rocm-smi | — |\n" +
	"\n" +
	"## Kubernetes\n" +
	"\n" +
	"| Metric | Type | From |\n" +
	"|---|---|---|\n" +
	"| `pai_node_count` | gauge =1 per node | `k8s_watchdog` |\n"

func TestParse(t *testing.T) {
	c, err := Parse(strings.NewReader(sample), "metrics.md")
	require.NoError(t, err)
	assert.Equal(t, []Metric{
		{Name: "cmd_rocm_smi_latency_seconds", Type: "histogram", Planned: true, Where: "metrics.md:24"},
		{Name: "collector_iteration_count_total", Type: "counter", From: []string{"gpu", "task"}, Where: "metrics.md:12"},
		{Name: "node_memory_MemFree_bytes", Type: "gauge", From: []string{"task"}, Where: "metrics.md:11"},
		{Name: "node_memory_MemTotal_bytes", Type: "gauge", From: []string{"task"}, Where: "metrics.md:11"},
		{Name: "pai_node_count", Type: "gauge", From: []string{"k8s_watchdog"}, Where: "metrics.md:30"},
	}, c.Metrics(), "a planned heading covers its subheadings and ends at the next heading of its level")
	_, ok := c.Lookup("node_name")
	assert.False(t, ok, "a table whose first column is not \"metric\" lists no contract name")
}

func TestParseErrors(t *testing.T) {
	const header = "| metric | type | from |\n|---|---|---|\n"
	for _, tc := range []struct {
		name, doc, err string
	}{
		{"wildcard", header + "| `service_*` | gauge | `task` |\n", "metrics.md:3: `service_*` is not a metric name: list each name in full"},
		{"twice", header + "| `gpu_up` | gauge | `gpu` |\n| `gpu_up` | gauge | `gpu` |\n", "metrics.md:4: gpu_up is listed twice (also at metrics.md:3)"},
		{"no type column", "| metric | from |\n|---|---|\n", `metrics.md:1: a contract table needs a "type" column`},
		{"unknown type", header + "| `gpu_up` | enum | `gpu` |\n", `metrics.md:3: the type "enum" does not start with one of [gauge counter histogram]`},
		{"no producer", header + "| `gpu_up` | gauge | the gpu receiver |\n", `metrics.md:3: no producing component in backticks in the "from" column`},
		{"no name", header + "| gpu_up | gauge | `gpu` |\n", "metrics.md:3: no metric name in backticks in the first column"},
		{"short row", header + "| `gpu_up` | gauge |\n", "metrics.md:3: the row has 2 cells, fewer than its table's header"},
		{"empty", "# Nothing\n", `metrics.md lists no metric: no table has a first column headed "metric"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.doc), "metrics.md")
			assert.EqualError(t, err, tc.err)
		})
	}
}

func TestCheckPage(t *testing.T) {
	c, err := Parse(strings.NewReader(sample), "metrics.md")
	require.NoError(t, err)
	page := "# HELP node_memory_MemTotal_bytes MemTotal from /proc/meminfo.\n" +
		"# TYPE node_memory_MemTotal_bytes gauge\n" +
		"node_memory_MemTotal_bytes{node_name=\"n\"} 1.6e+10\n" +
		"# TYPE collector_iteration_count_total gauge\n" +
		"collector_iteration_count_total{name=\"task\",node_name=\"n\"}\n" +
		"# TYPE cmd_rocm_smi_latency_seconds histogram\n" +
		"# TYPE node_load1 gauge\n"
	families, err := PageFamilies(strings.NewReader(page))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"node_memory_MemTotal_bytes":      "gauge",
		"collector_iteration_count_total": "gauge",
		"cmd_rocm_smi_latency_seconds":    "histogram",
		"node_load1":                      "gauge",
	}, families)
	assert.Equal(t, []string{
		"cmd_rocm_smi_latency_seconds is on the page but metrics.md:24 lists it as planned",
		"collector_iteration_count_total is a gauge on the page but a counter at metrics.md:12",
		"node_load1 (gauge) is on the page but not in the contract: add it to docs/metrics.md",
	}, c.CheckPage(families))
}
