// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// BenchmarkScrape measures one collection (every NVML call through its deadline guard, the
// metrics built) on the simulated backend, per node size; ns/gpu is the cost per GPU and
// interval.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			sc, err := simulated.ParseScenario(fmt.Appendf(nil, `
profile: dgxh100
gpus: %d
signals:
  utilization: {sine: {min: 10, max: 90, period: 10m}}
  temperature: {random_walk: {min: 30, max: 80, step: 2, every: 10s}}
processes:
  - {pid: 100, gpu: 0, memory_mib: 20000, sm: 80}
  - {pid: 101, gpu: 1, memory_mib: 20000, sm: 80}
`, n))
			require.NoError(b, err)
			clock := newFakeClock()
			srv := simulated.New(sc, clock)
			b.Cleanup(srv.Close)
			cfg := testConfig()
			cfg.XID.NVMLEvents = false
			src := startScraper(b, cfg, srv, clock, nil)
			b.ReportAllocs()
			for b.Loop() {
				src.scrape()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/gpu")
		})
	}
}
