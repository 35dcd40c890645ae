// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// tolerance says how far our value may be from node_exporter's for each series both expose.
// The two read the same kernel files a moment apart (our collection runs every 200 ms), so
// static values must be identical and counters may only have moved by what the machine did in
// that moment.
var nodeTolerances = map[string]struct {
	absolute float64 // allowed difference
	relative float64 // or this fraction of the value, whichever is larger
}{
	"node_uname_info":                   {0, 0},
	"node_memory_MemTotal_bytes":        {0, 0},
	"node_filesystem_size_bytes":        {0, 0},
	"node_cpu_seconds_total":            {2, 0},             // 2 CPU-seconds: two cores for a second
	"node_memory_MemFree_bytes":         {256 << 20, 0.02},  // the test itself allocates
	"node_memory_MemAvailable_bytes":    {256 << 20, 0.02},  //
	"node_memory_Buffers_bytes":         {64 << 20, 0.02},   //
	"node_memory_Cached_bytes":          {256 << 20, 0.02},  //
	"node_network_receive_bytes_total":  {8 << 20, 0},       // the scrapes themselves cross lo
	"node_network_transmit_bytes_total": {8 << 20, 0},       //
	"node_disk_read_bytes_total":        {256 << 20, 0},     //
	"node_disk_written_bytes_total":     {256 << 20, 0},     //
	"node_filesystem_avail_bytes":       {256 << 20, 0.001}, //
	"node_load1":                        {2, 0},             //
}

// defaultMountPointsExclude is upstream node_exporter 1.5's, as the task receiver's default.
const defaultMountPointsExclude = `^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)`

// TestAgainstNodeExporter runs a real node_exporter beside the collector on this machine: the
// node_* series both expose must have the same label sets and agree within the tolerances.
func TestAgainstNodeExporter(t *testing.T) {
	nodeExporter := requireTool(t, "prometheus-node-exporter")
	nePort := stack.FreePort(t)
	startProcess(t, nodeExporter,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort),
		"--collector.disable-defaults",
		"--collector.cpu", "--collector.meminfo", "--collector.netdev", "--collector.diskstats",
		"--collector.filesystem", "--collector.loadavg", "--collector.uname",
		// Debian patches node_exporter's defaults (it hides lo, /run, /mnt and /media); compare
		// against upstream's, which the collector keeps.
		"--collector.netdev.device-exclude=^$",
		"--collector.filesystem.mount-points-exclude="+defaultMountPointsExclude,
	)
	ours := startCollector(t, filepath.Join(repoRoot(t), "distro", "local.yaml"),
		"receivers::task::collection_interval=200ms")
	neURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort)

	// Every node family there, not a page served while the first collection was taken in.
	waitForCollections(t, ours, 2)
	var theirs map[string]*dto.MetricFamily
	eventually(t, "node_exporter", func() bool {
		var err error
		theirs, _, err = scrape(neURL)
		return err == nil
	})
	mine, _, err := scrape(ours)
	require.NoError(t, err)

	for name, tol := range nodeTolerances {
		t.Run(name, func(t *testing.T) {
			want := byLabels(theirs[name])
			got := byLabels(mine[name])
			require.NotEmpty(t, want, "node_exporter has no %s on this machine", name)
			assert.Equal(t, sortedKeys(want), sortedKeys(got), "label sets of %s", name)
			for labels, w := range want {
				g, ok := got[labels]
				if !ok {
					continue
				}
				allowed := math.Max(tol.absolute, tol.relative*math.Abs(w))
				assert.InDelta(t, w, g, allowed, "%s{%s}: node_exporter %v, ours %v", name, labels, w, g)
			}
		})
	}
}

// byLabels indexes a family's values by label set, without node_name (ours only).
func byLabels(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[labelsOf(m, "node_name")] = valueOf(m)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ourInfiniBandNames are the node_infiniband_* families of our own (docs/metrics.md says why),
// which node_exporter 1.5 does not have.
var ourInfiniBandNames = map[string]bool{
	"node_infiniband_link_layer_info":                true,
	"node_infiniband_hw_counters_total":              true,
	"node_infiniband_expected_active_ports":          true,
	"node_infiniband_expected_rate_bytes_per_second": true,
}

// TestAgainstNodeExporterInfiniBand runs a real node_exporter's infiniband collector and the
// collector on the same fixture sysfs trees (an NDR InfiniBand node with a port down and one at
// half width, and a RoCE node): every node_infiniband_* family node_exporter exposes must be ours
// too, with its type, the same label sets and the same values (the trees are still), and every
// other node_infiniband_* family of ours must be one of our own names.
func TestAgainstNodeExporterInfiniBand(t *testing.T) {
	nodeExporter := requireTool(t, "prometheus-node-exporter")
	for _, host := range []string{"v1-systemd-containerd", "v2-systemd-crio"} {
		t.Run(host, func(t *testing.T) {
			root := filepath.Join(repoRoot(t), "receiver", "taskreceiver", "testdata", "hosts", host)
			nePort := stack.FreePort(t)
			startProcess(t, nodeExporter,
				fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nePort),
				"--collector.disable-defaults", "--collector.infiniband",
				"--path.sysfs="+filepath.Join(root, "sys"),
			)
			ours := startCollector(t, filepath.Join(repoRoot(t), "distro", "local.yaml"),
				"receivers::task::root_path="+root,
				"receivers::task::collection_interval=200ms",
				"service::pipelines::metrics::receivers=[task]",
			)
			mine := waitForCollections(t, ours, 2)
			var theirs map[string]*dto.MetricFamily
			eventually(t, "node_exporter", func() bool {
				var err error
				theirs, _, err = scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", nePort))
				return err == nil
			})

			compared := 0
			for name, want := range theirs {
				if !strings.HasPrefix(name, "node_infiniband_") {
					continue
				}
				compared++
				got, ok := mine[name]
				if !assert.True(t, ok, "node_exporter has %s, we do not", name) {
					continue
				}
				assert.Equal(t, want.GetType(), got.GetType(), "type of %s", name)
				assert.Equal(t, byLabels(want), byLabels(got), "%s", name)
			}
			// Both nodes' ports: state, physical state, rate, info and the 22 counters/ families.
			assert.Equal(t, 26, compared, "node_infiniband_* families of node_exporter")
			for name := range mine {
				if strings.HasPrefix(name, "node_infiniband_") && theirs[name] == nil {
					assert.True(t, ourInfiniBandNames[name], "%s is neither node_exporter's nor one of ours", name)
				}
			}
		})
	}
}
