// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// gpmMetricNames are the metrics read with GPM.
var gpmMetricNames = []string{
	"gpu_graphics_engine_active_percent", "gpu_sm_active_percent", "gpu_sm_occupancy_percent",
	"gpu_pipe_active_percent", "gpu_dram_active_percent", "gpu_pcie_average_bytes_per_second",
	"gpu_nvlink_average_bytes_per_second",
}

// gauge is the double value of the single data point of name whose attributes include attrs.
func gauge(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs ...string) float64 {
	t.Helper()
	var found []float64
	for _, dp := range points(rm, name) {
		if hasAttrs(dp.Attributes(), attrs...) {
			found = append(found, dp.DoubleValue())
		}
	}
	require.Len(t, found, 1, "data points of %s%v", name, attrs)
	return found[0]
}

func assertNoGPM(t *testing.T, rm pmetric.ResourceMetrics, why string) {
	t.Helper()
	for _, name := range gpmMetricNames {
		assert.Empty(t, points(rm, name), "%s: %s", name, why)
	}
}

// TestGPM: on Hopper the metrics cover the interval between two collections (none on the first,
// absent rather than 0), per GPU and per MIG instance; each GPU keeps two sample buffers, a lost
// GPU's are freed, and shutdown frees the rest, none used after it was freed.
func TestGPM(t *testing.T) {
	clock := newFakeClock()
	srv := writeScenario(t, clock, `
profile: dgxh100
gpus: 3
signals: {utilization: {constant: 60}}
activity: {sm: 0.5, occupancy: 0.5, hmma: 0.4, fp32: 0.2, dram: 0.3}
mig:
  - {gpu: 2, instances: 2, memory_mib: 20000, used_mib: 100, busy: 1}
faults:
  - {at: 25s, gpu: 1, kind: gpu_lost}
`)
	cfg := testConfig()
	cfg.XID.NVMLEvents = false
	src := newNVMLNode(settingsFor(cfg, clock), srv, func() {})
	src.start(nil)

	md := src.scrape()
	for _, gpu := range []string{"0", "1", "2"} {
		assertNoGPM(t, gpuResource(t, md, gpu), "a first collection has no interval yet")
	}
	clock.Advance(10 * time.Second)
	md = src.scrape()
	rm := gpuResource(t, md, "0")
	assert.InDelta(t, 60, gauge(t, rm, "gpu_graphics_engine_active_percent"), 1e-9)
	assert.InDelta(t, 30, gauge(t, rm, "gpu_sm_active_percent"), 1e-9)
	assert.InDelta(t, 15, gauge(t, rm, "gpu_sm_occupancy_percent"), 1e-9)
	assert.InDelta(t, 12, gauge(t, rm, "gpu_pipe_active_percent", "pipe", "tensor"), 1e-9)
	assert.InDelta(t, 12, gauge(t, rm, "gpu_pipe_active_percent", "pipe", "tensor_hmma"), 1e-9)
	assert.InDelta(t, 6, gauge(t, rm, "gpu_pipe_active_percent", "pipe", "fp32"), 1e-9)
	assert.InDelta(t, 18, gauge(t, rm, "gpu_dram_active_percent"), 1e-9)
	// The simulation's PCIe: 20 MB/s received per percent of utilization, in NVML's KiB.
	assert.InDelta(t, 60*20_000*1024, gauge(t, rm, "gpu_pcie_average_bytes_per_second", "direction", "rx"), 1e-3)
	assert.Positive(t, gauge(t, rm, "gpu_nvlink_average_bytes_per_second", "direction", "tx"))
	for _, dp := range points(rm, "gpu_sm_active_percent") {
		_, ok := dp.Attributes().Get("gpu_instance_id")
		assert.False(t, ok, "the whole GPU's value has no instance")
	}

	mig := gpuResource(t, md, "2")
	assert.InDelta(t, 60, gauge(t, mig, "gpu_graphics_engine_active_percent", "gpu_instance_id", "1"), 1e-9)
	assert.InDelta(t, 30, gauge(t, mig, "gpu_sm_active_percent", "gpu_instance_id", "1"), 1e-9)
	assert.InDelta(t, 0, gauge(t, mig, "gpu_sm_active_percent", "gpu_instance_id", "2"), 1e-9, "an idle instance is 0: measured")
	assert.Len(t, points(mig, "gpu_graphics_engine_active_percent"), 3, "the GPU and its two instances")
	assert.Len(t, points(mig, "gpu_pcie_average_bytes_per_second"), 2, "the interconnects are the GPU's: rx and tx")
	// Two buffers each: the GPUs 0 and 1, GPU 2 and its two instances.
	assert.Equal(t, int64(10), srv.GPMSamplesLive())

	clock.Advance(10 * time.Second)
	md = src.scrape()
	assert.Len(t, points(gpuResource(t, md, "0"), "gpu_sm_active_percent"), 1)
	clock.Advance(10 * time.Second) // GPU 1 is lost at 25 s
	md = src.scrape()
	assertUp(t, md, map[string]int64{"0": 1, "1": 0, "2": 1})
	assertNoGPM(t, gpuResource(t, md, "1"), "a lost GPU")
	assert.Equal(t, int64(8), srv.GPMSamplesLive(), "the lost GPU's buffers freed")

	waitOrFail(t, src.shutdown, "shutdown did not return")
	assert.Zero(t, srv.GPMSamplesLive(), "every buffer freed at shutdown")
	assert.Zero(t, srv.GPMSamplesMisused(), "no buffer used after it was freed")
}

// TestGPMAbsentOnA100: a GPU without GPM reports none of its metrics, not zeros, and no buffer
// is allocated for it; neither where the driver predates GPM.
func TestGPMAbsentOnA100(t *testing.T) {
	clock := newFakeClock()
	for name, lib := range map[string]func(*simulated.Server) nvml.Interface{
		"dgxa100":    func(s *simulated.Server) nvml.Interface { return s },
		"old driver": func(s *simulated.Server) nvml.Interface { return preGPMDriver{s} },
	} {
		t.Run(name, func(t *testing.T) {
			scenario := "dgxa100.yaml"
			if name == "old driver" {
				scenario = "dgxh100.yaml"
			}
			srv := simServer(t, scenario, clock)
			src := startScraper(t, testConfig(), lib(srv), clock, nil)
			for range 2 {
				clock.Advance(10 * time.Second)
				assertNoGPM(t, gpuResource(t, src.scrape(), "0"), "no GPM on this GPU or driver")
			}
			assert.Zero(t, srv.GPMSamplesLive())
		})
	}
}

// preGPMDriver is the simulated server as a driver older than GPM (R520) shows it.
type preGPMDriver struct {
	*simulated.Server
}

type symbolsWithout []string

func (s symbolsWithout) LookupSymbol(name string) error {
	if slices.Contains(s, name) {
		return errors.New("undefined symbol: " + name)
	}
	return nil
}

func (preGPMDriver) Extensions() nvml.ExtendedInterface { return symbolsWithout{symGPM, symGPMMig} }

// heldGPM is the simulated server whose next GpmMetricsGet, once armed, blocks until released,
// and which notes how many sample buffers were still allocated when NVML was shut down.
type heldGPM struct {
	*simulated.Server
	armed            atomic.Bool
	entered, release chan struct{}
	shut             atomic.Bool
	liveAtShutdown   atomic.Int64
}

func (h *heldGPM) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	if h.armed.CompareAndSwap(true, false) {
		h.entered <- struct{}{}
		<-h.release
	}
	return h.Server.GpmMetricsGet(m)
}

func (h *heldGPM) Shutdown() nvml.Return {
	h.liveAtShutdown.Store(h.GPMSamplesLive())
	h.shut.Store(true)
	return nvml.SUCCESS
}

// TestGPMLateCall: a GpmMetricsGet past its deadline keeps running in its goroutine and still
// uses both samples. Shutdown returns without waiting for it, and neither frees them nor shuts
// NVML down under it: that happens once the call returns, buffers first.
func TestGPMLateCall(t *testing.T) {
	clock := newFakeClock()
	lib := &heldGPM{
		Server:  writeScenario(t, clock, "profile: dgxh100\ngpus: 1\nsignals: {utilization: {constant: 50}}\n"),
		entered: make(chan struct{}, 1), release: make(chan struct{}),
	}
	cfg := testConfig()
	cfg.XID.NVMLEvents = false
	src := newNVMLNode(settingsFor(cfg, clock), lib, func() {})
	src.start(nil)
	src.scrape()
	clock.Advance(10 * time.Second)
	lib.armed.Store(true)
	scraped := make(chan pmetric.Metrics, 1)
	go func() { scraped <- src.scrape() }()
	waitOrFail(t, func() { <-lib.entered }, "the collection made no GpmMetricsGet")
	nextWait(t, clock, cfg.CallTimeout)
	var md pmetric.Metrics
	waitOrFail(t, func() { md = <-scraped }, "the collection did not end at the call's deadline")
	rm := gpuResource(t, md, "0")
	assert.Equal(t, int64(0), value(t, rm, "gpu_up"))
	assert.Equal(t, int64(1), value(t, rm, "gpu_nvml_timeouts_total", "call", "GpmMetricsGet"))
	assertNoGPM(t, rm, "the interval's metrics are the late call's")

	waitOrFail(t, src.shutdown, "shutdown waited for the late call")
	assert.Equal(t, int64(2), lib.GPMSamplesLive(), "the late call's samples are not freed under it")
	assert.False(t, lib.shut.Load(), "NVML not shut down under the late call")
	close(lib.release)
	poll.Until(t, 10*time.Second, "NVML to be shut down once the late call returned", lib.shut.Load)
	assert.Zero(t, lib.liveAtShutdown.Load(), "the buffers were freed before NVML was shut down")
	assert.Zero(t, lib.GPMSamplesMisused(), "no buffer used after it was freed")
}

// noGPMQuery is a GPU whose driver answers GpmQueryDeviceSupport with NOT_SUPPORTED (a vGPU
// guest, say), counting the calls.
type noGPMQuery struct {
	*simulated.Device
	calls *atomic.Int32
}

func (d noGPMQuery) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	d.calls.Add(1)
	return nvml.GpmSupport{}, nvml.ERROR_NOT_SUPPORTED
}

// TestGPMNotSupportedAskedOnce: a GPU that says GPM is not supported is asked once, not every
// collection, and reports none of GPM's metrics.
func TestGPMNotSupportedAskedOnce(t *testing.T) {
	clock := newFakeClock()
	var calls atomic.Int32
	srv := writeScenario(t, clock, "profile: dgxh100\ngpus: 1\n")
	src := startScraper(t, testConfig(), withGPUs(srv, func(d *simulated.Device) nvml.Device { return noGPMQuery{d, &calls} }), clock, nil)
	for range 3 {
		clock.Advance(10 * time.Second)
		rm := gpuResource(t, src.scrape(), "0")
		assert.Equal(t, int64(1), value(t, rm, "gpu_up"))
		assertNoGPM(t, rm, "GPM not supported")
	}
	assert.Equal(t, int32(1), calls.Load())
	assert.Zero(t, srv.GPMSamplesLive())
}
