// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestTextfileThroughNodeExporter runs the collector on a fixture host with the textfile
// exporter beside the prometheus exporter (the same naming settings), and a real node_exporter
// serving the exporter's directory with its textfile collector: node_exporter must serve every
// series of the collector's own page, label for label, except the node_* names it serves
// itself, and report no error reading the file.
func TestTextfileThroughNodeExporter(t *testing.T) {
	dir := t.TempDir()
	metrics := startCollector(t, filepath.Join(repoRoot(t), "distro", "local.yaml"),
		"receivers::task::collection_interval=1s",
		"receivers::task::root_path="+fixtureHost(t),
		"receivers::task::service_namespaces=[pai]",
		"exporters::textfile::directory="+dir,
		"exporters::textfile::write_interval=1s",
		"exporters::textfile::translation_strategy=UnderscoreEscapingWithoutSuffixes",
		"exporters::textfile::without_scope_info=true",
		`exporters::textfile::resource_constant_labels::included=["*"]`,
		"service::pipelines::metrics::exporters=[prometheus_page,textfile]",
	)
	port := stack.FreePort(t)
	startProcess(t, requireTool(t, "prometheus-node-exporter"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir,
	)
	nodeExporter := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)

	want := waitForCollections(t, metrics, 3)
	var got map[string]*dto.MetricFamily
	eventually(t, "node_exporter to serve the textfile's task series", func() bool {
		f, _, err := scrape(nodeExporter)
		got = f
		return err == nil && iterations(f) >= 3
	})
	require.Contains(t, got, "node_textfile_scrape_error")
	assert.Zero(t, got["node_textfile_scrape_error"].GetMetric()[0].GetGauge().GetValue(), "node_exporter read the file without error")

	compared := 0
	for name, family := range want {
		if strings.HasPrefix(name, "node_") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			require.Contains(t, got, name)
			assert.Equal(t, family.GetType(), got[name].GetType())
			assert.Equal(t, labelSets(family), labelSets(got[name]))
		})
		compared++
	}
	assert.Greater(t, compared, 20, "task, service, process and gpu families compared")
	for name := range want {
		if strings.HasPrefix(name, "node_") {
			assert.NotContains(t, got, name, "the collector's node_* names are left to node_exporter's own collectors")
		}
	}
}

func labelSets(f *dto.MetricFamily) []string {
	var sets []string
	for _, m := range f.GetMetric() {
		sets = append(sets, labelsOf(m))
	}
	slices.Sort(sets)
	return sets
}
