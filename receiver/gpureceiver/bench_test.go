// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// BenchmarkScrape measures one collection (every NVML call through its deadline guard, the
// metrics built) on the simulated backend, per node size; ns/gpu is the cost per GPU and
// interval. gpm=off is the same node seen through a driver without GPM: the difference is GPM's
// cost (a sample, the metrics of the interval, their data points). The clock moves 10 s a
// collection, so each has an interval for GPM to measure.
func BenchmarkScrape(b *testing.B) {
	for _, c := range []struct {
		n   int
		gpm bool
	}{{8, true}, {8, false}, {64, true}, {64, false}} {
		n := c.n
		b.Run(fmt.Sprintf("gpus=%d/gpm=%t", n, c.gpm), func(b *testing.B) {
			sc, err := gpuscenario.Parse(fmt.Appendf(nil, `
profile: dgxh100
gpus: %d
signals:
  utilization: {sine: {min: 10, max: 90, period: 10m}}
  temperature: {random_walk: {min: 30, max: 80, step: 2, every: 10s}}
processes:
  - {pid: 100, gpu: 0, memory_mib: 20000, sm: 80}
  - {pid: 101, gpu: 1, memory_mib: 20000, sm: 80}
`, n), "")
			require.NoError(b, err)
			clock := newFakeClock()
			srv := simulated.New(sc, clock)
			b.Cleanup(srv.Close)
			cfg := testConfig()
			cfg.XID.NVMLEvents = false
			var lib nvml.Interface = srv
			if !c.gpm {
				lib = preGPMDriver{srv}
			}
			src := startScraper(b, cfg, lib, clock, nil)
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(10 * time.Second)
				src.scrape()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/gpu")
		})
	}
}

// BenchmarkGPM is GPM's part of one GPU's collection alone (ns/op and allocs/op per GPU and
// interval): a sample into the buffer the previous collection did not use, the interval's
// metrics from the two, each call through the GPU's deadline guard, and their 15 data points
// emitted; with mig=2, the GPU's and two MIG instances' samples and metrics.
func BenchmarkGPM(b *testing.B) {
	for _, migs := range []int{0, 2} {
		b.Run(fmt.Sprintf("mig=%d", migs), func(b *testing.B) {
			scenario := "profile: dgxh100\ngpus: 1\nsignals: {utilization: {constant: 70}}\n"
			if migs > 0 {
				scenario += fmt.Sprintf("mig: [{gpu: 0, instances: %d, memory_mib: 20000, busy: 1}]\n", migs)
			}
			sc, err := gpuscenario.Parse([]byte(scenario), "")
			require.NoError(b, err)
			clock := newFakeClock()
			srv := simulated.New(sc, clock)
			b.Cleanup(srv.Close)
			cfg := testConfig()
			cfg.XID.NVMLEvents = false
			src := startScraper(b, cfg, srv, clock, nil)
			src.scrape() // enumerated, the first samples taken
			g, mb := src.gpus[0], src.mbs[src.gpus[0]]
			instances := make([]int, migs)
			for i := range instances {
				instances[i] = i + 1
			}
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(10 * time.Second)
				r := &gpuRead{s: src.nvmlBackend, gpu: g, dev: g.id.handle, mb: mb, now: 1, instances: instances, instancesKnown: true}
				readGPM(r)
				if r.down != nvml.SUCCESS {
					b.Fatal("the GPU went down")
				}
				mb.Emit()
			}
		})
	}
}

// BenchmarkAMDScrape measures one collection of the amdgpu backend on the fixture nodes: the
// listing of devices and processes, every GPU's files read under its deadline, the metrics
// built; ns/gpu is the cost per device and interval.
func BenchmarkAMDScrape(b *testing.B) {
	for name, n := range map[string]amdgpufixture.Node{"mi300x": amdgpufixture.MI300X(), "mi300x-cpx": amdgpufixture.MI300XCPX(8), "mi250x": amdgpufixture.MI250X()} {
		b.Run(name, func(b *testing.B) {
			root := b.TempDir()
			require.NoError(b, amdgpufixture.Write(root, n))
			cfg := testConfig()
			cfg.Backend, cfg.RootPath = BackendAMDGPU, root
			s := newAMDScraper(settingsFor(cfg, newFakeClock()))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.scrape()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(s.devices)), "ns/gpu")
		})
	}
}
