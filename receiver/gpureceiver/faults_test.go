// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// writeScenario puts an inline scenario in a file, as the receiver reads them.
func writeScenario(t *testing.T, clock *clock.Fake, body string) *simulated.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	sc, err := simulated.Load(path)
	require.NoError(t, err)
	srv := simulated.New(sc, clock)
	t.Cleanup(srv.Close)
	return srv
}

func assertUp(t *testing.T, md pmetric.Metrics, up map[string]int64) {
	t.Helper()
	for gpu, want := range up {
		assert.Equal(t, want, value(t, gpuResource(t, md, gpu), "gpu_up"), "gpu_up of GPU %s", gpu)
	}
}

// TestLostGPU: a GPU that answers ERROR_GPU_IS_LOST or ERROR_RESET_REQUIRED is down with a
// fatal nvml condition and keeps its labels; the other GPUs report everything.
func TestLostGPU(t *testing.T) {
	clock := newFakeClock()
	src := startScraper(t, testConfig(), simServer(t, "dgxh100.yaml", clock), clock, nil)
	clock.Advance(30 * time.Second)
	md := src.scrape()

	assertUp(t, md, map[string]int64{"0": 1, "1": 1, "2": 0, "3": 1, "4": 1, "5": 0, "6": 1, "7": 1})
	for _, gpu := range []string{"2", "5"} {
		rm := gpuResource(t, md, gpu)
		assert.Equal(t, int64(healthFatal), value(t, rm, "gpu_health", "condition", "nvml"))
		assert.Empty(t, points(rm, "gpu_utilization"), "a lost GPU reports no readings")
		uuid, _ := rm.Resource().Attributes().Get("uuid")
		assert.NotEmpty(t, uuid.Str(), "a lost GPU keeps the UUID read before it was lost")
	}
	assert.Len(t, points(gpuResource(t, md, "3"), "gpu_utilization"), 1)
}

// TestHungCall: a call past call_timeout takes its GPU down (warning, timeout counted once),
// the other GPUs keep reporting, and the GPU comes back once the call returns. Deadlines are on
// the test's clock: it moves to GPU 3's once that call is known to be blocked and its deadline
// is the only one due, so no other call ever passes one and the healthy GPUs report however
// slow the machine is.
func TestHungCall(t *testing.T) {
	clock := newFakeClock()
	srv := writeScenario(t, clock, `
profile: dgxa100
signals: {utilization: {constant: 30}}
faults:
  - {at: 10s, gpu: 3, kind: hang, duration: 1m}
`)
	lib := &announcedCall{Server: srv, gpu: 3, entered: make(chan struct{}, 1)}
	cfg := testConfig()
	src := startScraper(t, cfg, lib, clock, nil)

	clock.Advance(15 * time.Second)
	scraped := make(chan pmetric.Metrics, 1)
	go func() { scraped <- src.scrape() }()
	waitOrFail(t, func() { <-lib.entered }, "the scrape made no GetUtilizationRates call on GPU 3")
	// GPU 3's first collection call is blocked by the hang: its deadline passes.
	nextWait(t, clock, cfg.CallTimeout)
	for i := range 2 {
		var md pmetric.Metrics
		if i == 0 {
			waitOrFail(t, func() { md = <-scraped }, "the scrape did not end when GPU 3's call passed its deadline")
		} else {
			md = src.scrape()
		}
		assertUp(t, md, map[string]int64{"0": 1, "2": 1, "3": 0, "4": 1, "7": 1})
		rm := gpuResource(t, md, "3")
		assert.Equal(t, int64(healthWarning), value(t, rm, "gpu_health", "condition", "nvml"))
		// The second scrape finds the call still running and makes no new one.
		assert.Equal(t, int64(1), value(t, rm, "gpu_nvml_timeouts_total", "call", "GetUtilizationRates"))
		assert.Len(t, points(gpuResource(t, md, "4"), "gpu_utilization"), 1)
	}

	clock.Advance(time.Minute)
	poll.Until(t, 10*time.Second, "GPU 3's call to return after its hang ended", func() bool { return !src.gpus[3].lane.Hung() })
	md := src.scrape()
	assertUp(t, md, map[string]int64{"3": 1})
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, md, "3"), "gpu_health", "condition", "nvml"))
}

// announcedCall is the simulated server whose GPU gpu says on entered when a
// GetUtilizationRates call begins, so a test knows the call is under way.
type announcedCall struct {
	*simulated.Server
	gpu     int
	entered chan struct{}
	once    sync.Once
	handle  *announcingDevice // one handle, as NVML's: a new one would be a new GPU
}

func (a *announcedCall) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	h, ret := a.Server.DeviceGetHandleByIndex(i)
	if i != a.gpu || ret != nvml.SUCCESS {
		return h, ret
	}
	a.once.Do(func() { a.handle = &announcingDevice{Device: h, entered: a.entered} })
	return a.handle, ret
}

type announcingDevice struct {
	nvml.Device
	entered chan struct{}
}

func (d *announcingDevice) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	select {
	case d.entered <- struct{}{}:
	default: // nobody is waiting for a later call
	}
	return d.Device.GetUtilizationRates()
}

// TestInitFailure: without a driver the scraper reports gpu_nvml_up 0, retries Init with
// backoff and makes no other NVML call. The mock has only Init: any other call would panic.
func TestInitFailure(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	cfg := testConfig()
	cfg.InitRetry = InitRetryConfig{InitialInterval: time.Second, MaxInterval: 2 * time.Second}
	cfg.ConfiguredGPUCount = new(int)
	*cfg.ConfiguredGPUCount = 8
	clock := newFakeClock()
	src := startScraper(t, cfg, lib, clock, nil)
	// The pauses are the only waits within max_interval: Init's deadline (call_timeout) is later.
	pause := func() time.Duration { return nextWait(t, clock, cfg.InitRetry.MaxInterval) }
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}, []time.Duration{pause(), pause(), pause()}, "exponential backoff up to max_interval")
	// The retry after the third pause: Init has been called 4 times, and not again, the clock
	// staying in the fourth pause.
	poll.Until(t, 10*time.Second, "the fourth Init call", func() bool { return len(lib.InitCalls()) >= 4 })
	assert.Len(t, lib.InitCalls(), 4)

	md := src.scrape()
	require.Equal(t, 1, md.ResourceMetrics().Len(), "only the node resource, no GPU")
	node := md.ResourceMetrics().At(0)
	assert.Equal(t, int64(0), value(t, node, "gpu_nvml_up"))
	assert.Equal(t, int64(8), value(t, node, "configured_gpu_count"))
	assert.Equal(t, int64(1), value(t, node, "collector_iteration_count_total", "name", "gpu"))
	assert.Empty(t, points(node, "gpu_devices_detected"))
}

// flakyInit fails Init a number of times before the simulated driver "loads".
type flakyInit struct {
	*simulated.Server
	failures atomic.Int32
}

func (f *flakyInit) Init() nvml.Return {
	if f.failures.Add(-1) >= 0 {
		return nvml.ERROR_DRIVER_NOT_LOADED
	}
	return f.Server.Init()
}

// TestInitRetrySucceeds: a driver that loads after the collector started is picked up. The
// backoff's timers are the test's: no real time passes.
func TestInitRetrySucceeds(t *testing.T) {
	clock := newFakeClock()
	lib := &flakyInit{Server: simServer(t, "dgxa100.yaml", clock)}
	lib.failures.Store(3)
	cfg := testConfig()
	cfg.InitRetry = InitRetryConfig{InitialInterval: time.Second, MaxInterval: 4 * time.Second}
	src := startScraper(t, cfg, lib, clock, nil)
	assert.Equal(t, int64(0), value(t, src.scrape().ResourceMetrics().At(0), "gpu_nvml_up"))

	// Init failed at start and fails on the first two retries; the third loads the driver. The
	// pauses are the only waits within max_interval: Init's deadline (call_timeout) is later.
	pause := func() time.Duration { return nextWait(t, clock, cfg.InitRetry.MaxInterval) }
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, []time.Duration{pause(), pause(), pause()})
	poll.Until(t, 10*time.Second, "NVML to be ready after the driver loaded", src.lib.ready.Load)
	md := src.scrape()
	assert.Equal(t, int64(1), value(t, md.ResourceMetrics().At(0), "gpu_nvml_up"))
	assert.Equal(t, int64(8), value(t, md.ResourceMetrics().At(0), "gpu_devices_detected"))
	assertUp(t, md, map[string]int64{"0": 1, "7": 1})
}

// oldDriver has none of the optional symbols, as an R450-era driver.
type oldDriver struct {
	*simulated.Server
}

type noSymbols struct{}

func (noSymbols) LookupSymbol(name string) error { return errors.New("undefined symbol: " + name) }

func (oldDriver) Extensions() nvml.ExtendedInterface { return noSymbols{} }

// TestMissingSymbols: calls the driver lacks are never made; older calls replace them where
// they exist, the rest is left out.
func TestMissingSymbols(t *testing.T) {
	clock := newFakeClock()
	srv := simServer(t, "dgxa100.yaml", clock)
	for _, d := range srv.Devices {
		// The sim answers only the new call; the old one comes from go-nvml's mock.
		d.(*simulated.Device).GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
			return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS
		}
	}
	src := startScraper(t, testConfig(), oldDriver{srv}, clock, nil)
	clock.Advance(30 * time.Second)
	rm := gpuResource(t, src.scrape(), "0")
	assert.Equal(t, int64(1), value(t, rm, "gpu_clock_event_reason", "reason", "hw_slowdown"))
	assert.Equal(t, int64(healthWarning), value(t, rm, "gpu_health", "condition", "power"))
	for _, absent := range []string{"gpu_energy_joules_total", "gpu_remapped_rows", "gpu_remapped_rows_pending", "gpu_mig_enabled"} {
		assert.Empty(t, points(rm, absent), absent)
	}
	// GetMemoryInfo (v1) replaces v2: its used memory includes the driver's reserved 512 MiB,
	// which it does not report apart.
	assert.Equal(t, int64(12<<30+512<<20), value(t, rm, "gpu_memory_used_bytes"))
	assert.Empty(t, points(rm, "gpu_memory_reserved_bytes"))
	assert.Len(t, points(rm, "gpu_memory_free_bytes"), 1)
}

// otherGPUs is the simulated server with its GPUs replaced, each wrapping the simulated one.
type otherGPUs struct {
	*simulated.Server
	devices []nvml.Device
}

func withGPUs(srv *simulated.Server, wrap func(*simulated.Device) nvml.Device) *otherGPUs {
	lib := &otherGPUs{Server: srv}
	for _, d := range srv.Devices {
		lib.devices = append(lib.devices, wrap(d.(*simulated.Device)))
	}
	return lib
}

func (o *otherGPUs) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(o.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return o.devices[i], nvml.SUCCESS
}

// preAmpereGPU retires pages instead of remapping rows.

type preAmpereGPU struct {
	*simulated.Device
}

func (preAmpereGPU) GetRetiredPages(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	if cause == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
		return []uint64{0x1000}, nvml.SUCCESS
	}
	return []uint64{0x2000, 0x3000}, nvml.SUCCESS
}

func (preAmpereGPU) GetRetiredPagesPendingStatus() (nvml.EnableState, nvml.Return) {
	return nvml.FEATURE_ENABLED, nvml.SUCCESS
}

func (preAmpereGPU) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED
}

// TestRetiredPagesOrRemappedRows: each GPU reports the memory repair its generation has and
// leaves the other out rather than reporting zeros.
func TestRetiredPagesOrRemappedRows(t *testing.T) {
	clock := newFakeClock()
	lib := withGPUs(simServer(t, "dgxa100.yaml", clock), func(d *simulated.Device) nvml.Device { return preAmpereGPU{d} })
	src := startScraper(t, testConfig(), lib, clock, nil)
	rm := gpuResource(t, src.scrape(), "0")
	assert.Equal(t, int64(2), value(t, rm, "nvidiasmi_retired_page_count", "type", "single"))
	assert.Equal(t, int64(1), value(t, rm, "nvidiasmi_retired_page_count", "type", "double"))
	assert.Equal(t, int64(healthWarning), value(t, rm, "gpu_health", "condition", "retired_pages"))
	assert.Empty(t, points(rm, "gpu_remapped_rows"))
	for _, dp := range points(rm, "gpu_health") {
		assert.False(t, hasAttrs(dp.Attributes(), "condition", "row_remap"), "no row_remap condition without row remapping")
	}

	// The Ampere mock itself: remapped rows, no retired pages.
	ampere := startScraper(t, testConfig(), simServer(t, "dgxa100.yaml", clock), clock, nil)
	rm = gpuResource(t, ampere.scrape(), "0")
	assert.Empty(t, points(rm, "nvidiasmi_retired_page_count"))
	assert.Len(t, points(rm, "gpu_remapped_rows"), 2)
}

// TestMIG: a GPU in MIG mode reports its instances' identity and memory and, as NVML gives
// none, no utilization; the other GPUs report MIG off.
func TestMIG(t *testing.T) {
	clock := newFakeClock()
	src := startScraper(t, testConfig(), simServer(t, "dgxh100.yaml", clock), clock, nil)
	md := src.scrape()
	mig := gpuResource(t, md, "6")
	assert.Equal(t, int64(1), value(t, mig, "gpu_mig_enabled"))
	assert.Empty(t, points(mig, "gpu_utilization"))
	used := points(mig, "gpu_mig_memory_used_bytes")
	require.Len(t, used, 3)
	seen := map[string]bool{}
	for _, dp := range used {
		assert.Equal(t, int64(1<<30), dp.IntValue())
		u, _ := dp.Attributes().Get("mig_uuid")
		assert.Regexp(t, `^MIG-[0-9a-f-]{36}$`, u.Str())
		gi, _ := dp.Attributes().Get("gpu_instance_id")
		seen[gi.Str()] = true
	}
	assert.Equal(t, map[string]bool{"1": true, "2": true, "3": true}, seen)
	assert.Equal(t, int64(19968<<20), value(t, mig, "gpu_mig_memory_total_bytes", "gpu_instance_id", "2"))

	other := gpuResource(t, md, "0")
	assert.Equal(t, int64(0), value(t, other, "gpu_mig_enabled"))
	assert.Empty(t, points(other, "gpu_mig_memory_used_bytes"))
}

// pcieVGPU is a PCIe card without NVLink, HBM sensor or video engines, licensed as a vGPU guest.
type pcieVGPU struct {
	*simulated.Device
}

func (pcieVGPU) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	for i := range values {
		values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
	}
	return nvml.SUCCESS
}

func (pcieVGPU) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	return 0, 0, nvml.ERROR_NOT_SUPPORTED
}

func (pcieVGPU) GetGridLicensableFeatures() (nvml.GridLicensableFeatures, nvml.Return) {
	f := nvml.GridLicensableFeatures{IsGridLicenseSupported: 1, LicensableFeaturesCount: 2}
	f.GridLicensableFeatures[0] = nvml.GridLicensableFeature{FeatureCode: uint32(nvml.GRID_LICENSE_FEATURE_CODE_COMPUTE)}
	f.GridLicensableFeatures[1] = nvml.GridLicensableFeature{FeatureCode: uint32(nvml.GRID_LICENSE_FEATURE_CODE_VGPU), FeatureState: 1}
	return f, nvml.SUCCESS
}

// TestFieldsAGPULacks: what a GPU does not have (a memory sensor, NVLink, an encoder) is left
// out, not reported as 0, while the rest of the same calls is; a licensed vGPU reports 1.
func TestFieldsAGPULacks(t *testing.T) {
	clock := newFakeClock()
	lib := withGPUs(simServer(t, "dgxa100.yaml", clock), func(d *simulated.Device) nvml.Device { return pcieVGPU{d} })
	rm := gpuResource(t, startScraper(t, testConfig(), lib, clock, nil).scrape(), "0")
	for _, absent := range []string{"gpu_memory_temperature_celsius", "gpu_nvlink_data_bytes_total"} {
		assert.Empty(t, points(rm, absent), absent)
	}
	codecs := points(rm, "gpu_codec_utilization")
	require.Len(t, codecs, 1, "the decoder only")
	assert.True(t, hasAttrs(codecs[0].Attributes(), "codec", "decoder"))
	assert.Equal(t, int64(1), value(t, rm, "gpu_vgpu_licensed"))

	// The simulated DGX: bare metal, so 0 as DCGM reports it, and every field present.
	rm = gpuResource(t, startScraper(t, testConfig(), simServer(t, "dgxa100.yaml", clock), clock, nil).scrape(), "0")
	assert.Equal(t, int64(0), value(t, rm, "gpu_vgpu_licensed"))
	assert.Len(t, points(rm, "gpu_memory_temperature_celsius"), 1)
	assert.Len(t, points(rm, "gpu_nvlink_data_bytes_total"), 2)
	assert.Len(t, points(rm, "gpu_codec_utilization"), 2)
}

// hungEnumeration is the simulated server whose handle of GPU 3 does not come back until the
// test releases it.
type hungEnumeration struct {
	*simulated.Server
	entered, release chan struct{}
}

func (h *hungEnumeration) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i == 3 {
		h.entered <- struct{}{}
		<-h.release
	}
	return h.Server.DeviceGetHandleByIndex(i)
}

// TestTimeoutDuringEnumeration: a call past its deadline while the GPUs are enumerated is
// counted in gpu_nvml_timeouts_total{call} and logged like one during collection, once; the GPU
// is down and the others report. Deadlines are on the test's clock: a call passes its deadline
// when the test moves the clock, never because the machine is slow.
func TestTimeoutDuringEnumeration(t *testing.T) {
	clock := newFakeClock()
	lib := &hungEnumeration{Server: simServer(t, "dgxa100.yaml", clock), entered: make(chan struct{}, 1), release: make(chan struct{})}
	core, logs := observer.New(zap.WarnLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg := testConfig()
	cfg.XID.NVMLEvents = false
	ss := settingsFor(cfg, clock)
	ss.set = set
	src := newNVMLNode(ss, lib, lib.Close)
	started := make(chan struct{})
	go func() { defer close(started); src.start(nil) }()
	t.Cleanup(func() {
		close(lib.release)
		src.shutdown()
	})

	waitOrFail(t, func() { <-lib.entered }, "enumeration never asked for GPU 3's handle")
	// Only GPU 3's call is waiting on a deadline now: enumeration makes one call at a time.
	nextWait(t, clock, cfg.CallTimeout)
	waitOrFail(t, func() { <-started }, "Init did not finish after GPU 3's call passed its deadline")

	for range 2 {
		md := src.scrape()
		assertUp(t, md, map[string]int64{"0": 1, "2": 1, "3": 0, "7": 1})
		rm := gpuResource(t, md, "3")
		assert.Equal(t, int64(1), value(t, rm, "gpu_nvml_timeouts_total", "call", "DeviceGetHandleByIndex"), "counted once: the next enumeration makes no call while it hangs")
		assert.Equal(t, int64(healthWarning), value(t, rm, "gpu_health", "condition", "nvml"))
	}
	logged := logs.FilterMessageSnippet("passed its deadline").All()
	require.Len(t, logged, 1)
	assert.Equal(t, "DeviceGetHandleByIndex", logged[0].ContextMap()["call"])
	assert.Equal(t, int64(3), logged[0].ContextMap()["gpu"])
}
