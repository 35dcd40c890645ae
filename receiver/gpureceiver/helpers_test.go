// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// newFakeClock is the clock of a test: it drives both the scenario and the receiver, so
// readings, timestamps, deadlines and retries do not depend on how fast the test runs.
func newFakeClock() *clock.Fake {
	return clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.NodeName = "gpu-node-07"
	cfg.XID.Kmsg = false
	return cfg
}

func simServer(tb testing.TB, scenario string, clock *clock.Fake) *simulated.Server {
	tb.Helper()
	sc, err := simulated.Load(filepath.Join("testdata", "scenarios", scenario))
	require.NoError(tb, err)
	srv := simulated.New(sc, clock)
	tb.Cleanup(srv.Close)
	return srv
}

// settingsFor is what the receiver hands the scraper and its backend, on the test's clock.
func settingsFor(cfg *Config, clock *clock.Fake) scraperSettings {
	return scraperSettings{cfg: cfg, set: receivertest.NewNopSettings(metadata.Type), nodeName: "gpu-node-07", clock: clock}
}

// nvmlNode is an NVML backend and the scraper over it, as the receiver runs them.
type nvmlNode struct {
	*gpuScraper
	*nvmlBackend
}

// newNVMLNode makes an NVML backend on lib, and its scraper, without starting them.
func newNVMLNode(ss scraperSettings, lib nvml.Interface, release func()) nvmlNode {
	b := newNVMLBackend(ss, lib, release)
	return nvmlNode{newScraper(ss, b), b}
}

// startScraper starts a scraper on lib as the receiver does and stops it at the end of the test.
func startScraper(tb testing.TB, cfg *Config, lib nvml.Interface, clock *clock.Fake, emit func(plog.Logs)) nvmlNode {
	tb.Helper()
	release := func() {}
	if c, ok := lib.(interface{ Close() }); ok {
		release = c.Close
	}
	n := newNVMLNode(settingsFor(cfg, clock), lib, release)
	n.start(emit)
	tb.Cleanup(func() {
		n.shutdown()
		// The simulation wakes the event watcher when it closes; a test waits for it.
		waitOrFail(tb, n.watcher.Wait, "the XID event watcher did not stop after shutdown")
	})
	return n
}

// nextWait waits until one timer of clock is due within d, and no other, moves the clock to it
// and returns how far that was: it ends the one wait a test expects (a retry's pause, the
// deadline of a call known to hang), never a call's deadline that is merely under way.
func nextWait(tb testing.TB, clock *clock.Fake, within time.Duration) time.Duration {
	tb.Helper()
	var moved time.Duration
	poll.Until(tb, 10*time.Second, fmt.Sprintf("one wait, and only one, due within %s", within), func() bool {
		var ok bool
		moved, ok = clock.AdvanceToOnly(within)
		return ok
	})
	return moved
}

// waitOrFail runs wait and fails the test if it has not returned within 10 s.
func waitOrFail(tb testing.TB, wait func(), msg string) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		tb.Fatal(msg)
	}
}

// gpuResource finds the resource of the GPU at minor number index.
func gpuResource(t *testing.T, md pmetric.Metrics, index string) pmetric.ResourceMetrics {
	t.Helper()
	for i := range md.ResourceMetrics().Len() {
		rm := md.ResourceMetrics().At(i)
		if v, ok := rm.Resource().Attributes().Get("minor_number"); ok && v.Str() == index {
			return rm
		}
	}
	require.FailNow(t, "no resource for GPU", index)
	return pmetric.ResourceMetrics{}
}

// points returns the data points of a gauge or sum by name, in a resource.
func points(rm pmetric.ResourceMetrics, name string) []pmetric.NumberDataPoint {
	var dps []pmetric.NumberDataPoint
	for i := range rm.ScopeMetrics().Len() {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			if m.Name() != name {
				continue
			}
			var s pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				s = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				s = m.Sum().DataPoints()
			}
			for k := range s.Len() {
				dps = append(dps, s.At(k))
			}
		}
	}
	return dps
}

// value is the int value of the single data point of name whose attributes include attrs.
func value(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs ...string) int64 {
	t.Helper()
	var found []int64
	for _, dp := range points(rm, name) {
		if hasAttrs(dp.Attributes(), attrs...) {
			found = append(found, dp.IntValue())
		}
	}
	require.Len(t, found, 1, "data points of %s%v", name, attrs)
	return found[0]
}

func hasAttrs(m pcommon.Map, kv ...string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if v, ok := m.Get(kv[i]); !ok || v.AsString() != kv[i+1] {
			return false
		}
	}
	return true
}
