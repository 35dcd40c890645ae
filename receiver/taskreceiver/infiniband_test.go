// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

const ibPort = "sys/class/infiniband/mlx5_2/ports/1/"

// devicesOf lists the HCAs a metric has points for.
func devicesOf(points []point) []string {
	var devices []string
	for _, p := range points {
		devices = append(devices, p.attrs["device"].(string))
	}
	return devices
}

// TestDamagedHCA: one HCA whose file cannot be parsed (or read) is skipped and counted under
// source="infiniband"; the node's other HCAs and every other source are still reported.
func TestDamagedHCA(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(string) error
	}{
		{"malformed rate", write(ibPort+"rate", "fast\n")},
		{"malformed state", write(ibPort+"state", "ACTIVE\n")},
		{"malformed counter", write(ibPort+"counters/symbol_error", "many\n")},
		{"malformed hw counter", write(ibPort+"hw_counters/out_of_sequence", "-1\n")},
		{"missing link layer", remove(ibPort + "link_layer")},
		{"missing firmware version", remove("sys/class/infiniband/mlx5_2/fw_ver")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := copyHost(t, "v1-systemd-containerd")
			require.NoError(t, tt.damage(root))
			points := pointsByName(scrapeOnce(t, newStartedScraper(t, testConfig(root))))
			assert.InDelta(t, 1, readErrors(points)["infiniband"], 0)
			assert.ElementsMatch(t, []string{"mlx5_0", "mlx5_1", "mlx5_3"}, devicesOf(points["node_infiniband_state_id"]))
			assert.ElementsMatch(t, []string{"mlx5_0", "mlx5_1", "mlx5_3"}, devicesOf(points["node_infiniband_info"]))
			assert.NotEmpty(t, points["node_memory_MemTotal_bytes"])
		})
	}
}

// TestNoInfiniBand: a node without /sys/class/infiniband (no RDMA device, or ib_core not loaded)
// reports no port and no read error.
func TestNoInfiniBand(t *testing.T) {
	root := copyHost(t, "v1-systemd-containerd")
	require.NoError(t, remove("sys/class/infiniband")(root))
	points := pointsByName(scrapeOnce(t, newStartedScraper(t, testConfig(root))))
	assert.Empty(t, points["node_infiniband_state_id"])
	assert.NotContains(t, readErrors(points), "infiniband")
}

// TestInfiniBandConfig: the switch turns every node_infiniband_* off; an expectation is emitted
// as the two expected_* gauges, in the units of the readings they are compared with.
func TestInfiniBandConfig(t *testing.T) {
	root := copyHost(t, "v1-systemd-containerd")

	off := testConfig(root)
	off.InfiniBand.Enabled = false
	for name := range pointsByName(scrapeOnce(t, newStartedScraper(t, off))) {
		assert.NotContains(t, name, "infiniband")
	}

	points := pointsByName(scrapeOnce(t, newStartedScraper(t, testConfig(root))))
	assert.Empty(t, points["node_infiniband_expected_active_ports"], "no expectation configured")
	assert.Empty(t, points["node_infiniband_expected_rate_bytes_per_second"])

	expecting := testConfig(root)
	expecting.InfiniBand.ExpectedActivePorts = 4
	expecting.InfiniBand.ExpectedRateGbps = 400
	points = pointsByName(scrapeOnce(t, newStartedScraper(t, expecting)))
	require.Len(t, points["node_infiniband_expected_active_ports"], 1)
	assert.InDelta(t, 4, points["node_infiniband_expected_active_ports"][0].value, 0)
	require.Len(t, points["node_infiniband_expected_rate_bytes_per_second"], 1)
	// The same bytes per second as node_infiniband_rate_bytes_per_second of a 4X NDR port.
	assert.InDelta(t, 5e10, points["node_infiniband_expected_rate_bytes_per_second"][0].value, 0)
	var ndr float64
	for _, p := range points["node_infiniband_rate_bytes_per_second"] {
		if p.attrs["device"] == "mlx5_0" {
			ndr = p.value
		}
	}
	assert.InDelta(t, 5e10, ndr, 0)
}

// FuzzInfiniBandFiles replaces one file of an HCA's port with arbitrary text and collects only
// the fabric (fast enough to fuzz procfs's sysfs parsers for real): the other HCA is always
// reported, the damaged one at most skipped and counted once, and nothing escapes.
func FuzzInfiniBandFiles(f *testing.F) {
	files := []string{"state", "phys_state", "rate", "link_layer", "counters/symbol_error", "counters/port_rcv_data", "hw_counters/out_of_sequence", "hw_counters/np_cnp_sent"}
	root := filepath.Join(f.TempDir(), "host")
	h := hostfixture.Host{CgroupVersion: 2}
	for n := range uint64(2) {
		h.HCAs = append(h.HCAs, hostfixture.ConnectX7(n, hostfixture.HCAPort{
			State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet",
			Counters: hostfixture.IBCounters(n, 3, 1), HwCounters: hostfixture.HwCounters(n, true),
		}))
	}
	require.NoError(f, hostfixture.Write(root, h))
	for i, name := range files {
		orig, err := os.ReadFile(filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1", name))
		require.NoError(f, err)
		f.Add(uint8(i), orig)
		f.Add(uint8(i), orig[:len(orig)/2])
	}
	f.Add(uint8(2), []byte("N/A (no PMA)\n"))
	f.Add(uint8(0), []byte("4: ACTIVE: extra\n"))
	s := newStartedScraper(f, testConfig(root))
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		path := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1", files[int(which)%len(files)])
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, content, 0o600))
		defer func() { require.NoError(t, os.WriteFile(path, orig, 0o600)) }()

		clear(s.readErrors)
		var errs scrapererror.ScrapeErrors
		s.scrapeInfiniBand(pcommon.NewTimestampFromTime(time.Now()), &errs)
		require.NoError(t, errs.Combine(), "one HCA's file is never a node-wide error")
		md := s.mb.Emit()
		points := pointsByName(md)
		assert.Contains(t, devicesOf(points["node_infiniband_state_id"]), "mlx5_1")
		assert.LessOrEqual(t, s.readErrors[metadata.AttributeSourceInfiniband], int64(1))
	})
}
