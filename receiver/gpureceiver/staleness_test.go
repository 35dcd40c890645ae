// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// TestProcessLeavingGPUEnds: when a process leaves a GPU its per-process series end at once
// (NoRecordedValue), so the prometheus exporter does not show it on the GPU until expiry.
func TestProcessLeavingGPUEnds(t *testing.T) {
	scenario := filepath.Join(t.TempDir(), "leaving.yaml")
	require.NoError(t, os.WriteFile(scenario, []byte(`profile: dgxa100
processes:
  - {pid: 4242, gpu: 0, memory_mib: 1024, sm: 50, until: 30s}
  - {pid: 4343, gpu: 0, memory_mib: 2048, sm: 20}
`), 0o600))
	sc, err := simulated.Load(scenario)
	require.NoError(t, err)
	clock := newFakeClock()
	srv := simulated.New(sc, clock)
	t.Cleanup(srv.Close)
	cfg := testConfig()
	cfg.XID.NVMLEvents = false
	src := startScraper(t, cfg, srv, clock, nil)

	pidsOf := func(md pmetric.Metrics, ended bool) []string {
		var pids []string
		for i := range md.ResourceMetrics().Len() {
			rm := md.ResourceMetrics().At(i)
			if v, ok := rm.Resource().Attributes().Get("minor_number"); !ok || v.Str() != "0" {
				continue
			}
			for _, dp := range points(rm, "gpu_process_memory_used_bytes") {
				if dp.Flags().NoRecordedValue() == ended {
					pid, _ := dp.Attributes().Get("pid")
					pids = append(pids, pid.AsString())
				}
			}
		}
		return pids
	}
	first := src.scrape()
	assert.ElementsMatch(t, []string{"4242", "4343"}, pidsOf(first, false))

	clock.Advance(time.Minute)
	second := src.scrape()
	assert.Equal(t, []string{"4343"}, pidsOf(second, false))
	assert.Equal(t, []string{"4242"}, pidsOf(second, true), "the departed process's series is ended")

	clock.Advance(time.Minute)
	assert.Empty(t, pidsOf(src.scrape(), true), "and only once")
}
