// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// The latency histogram measures the machine running the test; its shape is tested apart.
var compareOptions = []pmetrictest.CompareMetricsOption{
	pmetrictest.IgnoreStartTimestamp(),
	pmetrictest.IgnoreTimestamp(),
	pmetrictest.IgnoreResourceMetricsOrder(),
	pmetrictest.IgnoreMetricsOrder(),
	pmetrictest.IgnoreMetricDataPointsOrder(),
	pmetrictest.IgnoreMetricValues("cmd_nvml_latency_seconds"),
}

// TestScrapeGolden reads each golden scenario 30 s in, on the nvml backend's code path with
// go-nvml's DGX mock servers injected as the library, after a first collection at 0 s: GPM's
// metrics are those of the interval between the two.
func TestScrapeGolden(t *testing.T) {
	for _, name := range []string{"dgxa100", "dgxh100"} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			cfg := testConfig()
			sink := &logSink{}
			src := startScraper(t, cfg, simServer(t, name+".yaml", clock), clock, sink.emit)
			src.scrape()
			clock.Advance(30 * time.Second)
			// XIDs arrive through the event watcher's goroutine: read once it has them all.
			xids := scenarioXIDs(t, name+".yaml")
			poll.Until(t, 10*time.Second, fmt.Sprintf("the scenario's %d XIDs to be logged", xids), func() bool { return len(sink.records()) == xids })
			actual := src.scrape()
			goldentest.Metrics(t, filepath.Join("testdata", "expected", name+".yaml"), actual, compareOptions...)
		})
	}
}

// scenarioXIDs counts the XIDs a golden scenario injects.
func scenarioXIDs(t *testing.T, scenario string) int {
	sc, err := simulated.Load(filepath.Join("testdata", "scenarios", scenario))
	require.NoError(t, err)
	n := 0
	for i := range sc.Faults {
		if sc.Faults[i].Kind == "xid" {
			n++
		}
	}
	return n
}

// TestLatencyHistogram checks the hand-built histogram: one observation per NVML call,
// buckets past 60 s, cumulative.
func TestLatencyHistogram(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.XID.NVMLEvents = false // its calls would land in whichever scrape runs alongside
	src := startScraper(t, cfg, simServer(t, "dgxa100.yaml", clock), clock, nil)
	count := func() uint64 {
		md := src.scrape()
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := range ms.Len() {
			m := ms.At(i)
			if m.Name() != "cmd_nvml_latency_seconds" {
				continue
			}
			require.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality())
			dp := m.Histogram().DataPoints().At(0)
			bounds := dp.ExplicitBounds().AsRaw()
			assert.GreaterOrEqual(t, bounds[len(bounds)-1], 60.0)
			assert.Equal(t, len(bounds)+1, dp.BucketCounts().Len())
			var sum uint64
			for _, c := range dp.BucketCounts().AsRaw() {
				sum += c
			}
			assert.Equal(t, dp.Count(), sum)
			return dp.Count()
		}
		require.FailNow(t, "cmd_nvml_latency_seconds missing")
		return 0
	}
	// Every scrape makes the same calls on this scenario, so the count grows by the same step.
	c1, c2, c3 := count(), count(), count()
	assert.Greater(t, c2, c1)
	assert.Equal(t, c2-c1, c3-c2)
}
