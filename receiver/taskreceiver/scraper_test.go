// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// Filesystem sizes come from statfs on the machine running the test, so only their presence
// and labels are compared.
var compareOptions = []pmetrictest.CompareMetricsOption{
	pmetrictest.IgnoreStartTimestamp(),
	pmetrictest.IgnoreTimestamp(),
	pmetrictest.IgnoreResourceMetricsOrder(),
	pmetrictest.IgnoreMetricsOrder(),
	pmetrictest.IgnoreMetricDataPointsOrder(),
	pmetrictest.IgnoreMetricValues("node_filesystem_avail_bytes", "node_filesystem_size_bytes"),
}

func testConfig(root string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath = root
	cfg.NodeName = "gpu-node-07"
	cfg.ServiceNamespaces = []string{"pai"}
	return cfg
}

func newStartedScraper(tb testing.TB, cfg *Config) *taskScraper {
	tb.Helper()
	return startScraper(tb, cfg, receivertest.NewNopSettings(metadata.Type))
}

// startScraper starts a scraper on a clock of the test's, so its deadlines (statfs, a command
// line) never pass by themselves: on a loaded machine a slow call must not change what a test
// sees. The clock starts now, after the metrics builders' start time, as a collection does.
func startScraper(tb testing.TB, cfg *Config, set receiver.Settings) *taskScraper {
	tb.Helper()
	s := newTaskScraper(cfg, set)
	s.clock = clock.NewFake(time.Now())
	require.NoError(tb, s.start(tb.Context(), componenttest.NewNopHost()))
	return s
}

// advance moves a test scraper's clock: the time between collections, which rates divide by.
func advance(s *taskScraper, d time.Duration) { s.clock.(*clock.Fake).Advance(d) }

func scrapeOnce(tb testing.TB, s *taskScraper) pmetric.Metrics {
	tb.Helper()
	md, err := s.scrape(tb.Context())
	if err != nil {
		require.True(tb, scrapererror.IsPartialScrapeError(err), "a scrape error must be partial, never total: %v", err)
	}
	return md
}

// TestScrapeHosts compares one collection of each fixture host with its expected metrics.
func TestScrapeHosts(t *testing.T) {
	for _, host := range []string{"v1-cgroupfs-docker", "v1-systemd-containerd", "v2-systemd-crio"} {
		t.Run(host, func(t *testing.T) {
			s := newStartedScraper(t, testConfig(filepath.Join("testdata", "hosts", host)))
			actual := scrapeOnce(t, s)
			goldentest.Metrics(t, filepath.Join("testdata", "expected", host+".yaml"), actual, compareOptions...)
		})
	}
}
