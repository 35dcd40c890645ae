// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"bufio"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

func newServer(t *testing.T, body string) (*Server, *clock.Fake) {
	t.Helper()
	sc, err := gpuscenario.Parse([]byte(body), "")
	require.NoError(t, err)
	c := clock.NewFake(time.Unix(0, 0))
	srv := New(sc, c)
	t.Cleanup(srv.Close)
	return srv, c
}

// setTo moves the clock to scenario time d.
func setTo(c *clock.Fake, d time.Duration) {
	c.Advance(time.Unix(0, 0).Add(d).Sub(c.Now()))
}

func TestServerFollowsScenario(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxb200
gpus: 2
memory_mib: 1000
model: Test GPU
seed: 3
signals:
  utilization: {step: [{at: 0s, value: 0}, {at: 1m, value: 60}]}
  power: {constant: 500}
processes:
  - {pid: 7, gpu: 1, memory_mib: 100, sm: 40, until: 2m}
faults:
  - {at: 1m, gpu: 0, kind: pcie_downgrade, width: 4, duration: 1m}
  - {at: 30s, gpu: 1, kind: ecc, corrected: 2}
  - {at: 40s, gpu: 1, kind: ecc, corrected: 3, uncorrected: 1}
  - {at: 3m, gpu: 1, kind: reset_required}
`)
	n, _ := srv.DeviceGetCount()
	require.Equal(t, 2, n)
	d0, _ := srv.DeviceGetHandleByIndex(0)
	d1, _ := srv.DeviceGetHandleByIndex(1)
	name, _ := d0.GetName()
	assert.Equal(t, "Test GPU", name)
	uuid0, _ := d0.GetUUID()
	other, _ := newServer(t, "profile: dgxb200\nseed: 3\n")
	o0, _ := other.DeviceGetHandleByIndex(0)
	uuidOther, _ := o0.GetUUID()
	assert.Equal(t, uuid0, uuidOther, "UUIDs derive from seed and index")

	setTo(c, 90*time.Second)
	u, ret := d0.GetUtilizationRates()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(60), u.Gpu)
	w, _ := d0.GetCurrPcieLinkWidth()
	assert.Equal(t, 4, w)
	m, _ := d1.GetMemoryInfo_v2()
	assert.Equal(t, uint64(1000<<20), m.Total)
	assert.Equal(t, uint64(100<<20), m.Used)
	assert.Equal(t, uint64(reservedMiB<<20), m.Reserved)
	assert.Equal(t, uint64((1000-100-reservedMiB)<<20), m.Free)
	m1, _ := d1.GetMemoryInfo()
	assert.Equal(t, m.Used+m.Reserved, m1.Used, "v1 counts the reserved memory as used")
	assert.Equal(t, m.Free, m1.Free)
	fields := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_MEMORY_TEMP},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: math.MaxUint32},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: math.MaxUint32},
		{FieldId: nvml.FI_DEV_ENERGY},
	}
	require.Equal(t, nvml.SUCCESS, d0.GetFieldValues(fields))
	core, _ := d0.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, core+memoryAboveCore, binary.NativeEndian.Uint32(fields[0].Value[:4]))
	// Utilization 0 until 1 m, 60 % after: the trapezoid from 0 to 90 s is 27 s at full load.
	assert.Equal(t, uint64(27*nvlinkKiBPerSecond), binary.NativeEndian.Uint64(fields[1].Value[:]))
	assert.Equal(t, fields[1].Value, fields[2].Value, "all-reduce traffic is symmetric")
	assert.Equal(t, uint32(nvml.ERROR_NOT_SUPPORTED), fields[3].NvmlReturn, "a field the simulation does not give")
	enc, _, _ := d0.GetEncoderUtilization()
	dec, _, _ := d0.GetDecoderUtilization()
	assert.Equal(t, []uint32{0, 6}, []uint32{enc, dec})
	lic, ret := d0.GetGridLicensableFeatures()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Zero(t, lic.IsGridLicenseSupported, "bare metal, no vGPU")
	corrected, _ := d1.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	assert.Equal(t, uint64(5), corrected)
	_, unc, _, _, _ := d1.GetRemappedRows()
	assert.Equal(t, 1, unc)
	energy, _ := d0.GetTotalEnergyConsumption()
	assert.Equal(t, uint64(500*90*1000), energy, "500 W for 90 s, in mJ")

	setTo(c, 150*time.Second)
	require.Equal(t, nvml.SUCCESS, d0.GetFieldValues(fields[1:2]))
	assert.Equal(t, uint64((27+36)*nvlinkKiBPerSecond), binary.NativeEndian.Uint64(fields[1].Value[:]), "60 s more at 60 %")
	w, _ = d0.GetCurrPcieLinkWidth()
	assert.Equal(t, pcieWidth, w, "the downgrade lasted a minute")
	_, ret = d1.GetProcessUtilization(0)
	assert.Equal(t, nvml.ERROR_NOT_FOUND, ret, "no process after until")

	setTo(c, 4*time.Minute)
	_, ret = d1.GetUtilizationRates()
	assert.Equal(t, nvml.ERROR_RESET_REQUIRED, ret)
	_, ret = d0.GetUtilizationRates()
	assert.Equal(t, nvml.SUCCESS, ret)
}

// gpmMetrics reads the metrics ids from two samples of one target through the server.
func gpmMetrics(t *testing.T, srv *Server, first, second nvml.GpmSample, ids ...nvml.GpmMetricId) ([]float64, []nvml.Return) {
	t.Helper()
	m := &nvml.GpmMetricsGetType{NumMetrics: uint32(len(ids)), Sample1: first, Sample2: second}
	for i, id := range ids {
		m.Metrics[i].MetricId = uint32(id)
	}
	require.Equal(t, nvml.SUCCESS, srv.GpmMetricsGet(m))
	values, rets := make([]float64, len(ids)), make([]nvml.Return, len(ids))
	for i := range ids {
		values[i], rets[i] = m.Metrics[i].Value, nvml.Return(m.Metrics[i].NvmlReturn)
	}
	return values, rets
}

// TestGPM: the Hopper profiles answer GPM from two samples with the load averaged over the
// time between them (not the load at either), split by the scenario's activity; MIG instances
// each their own, their GPU their sum by share; the A100 has none. A freed sample's use is
// counted, as it would be a use after free on NVML.
func TestGPM(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxh100
gpus: 2
memory_mib: 80000
signals:
  utilization: {step: [{at: 0s, value: 0}, {at: 5s, value: 100}]}
activity: {sm: 0.5, occupancy: 0.4, hmma: 0.6, imma: 0.2, dfma: 0.1, fp64: 0.05, fp32: 0.3, fp16: 0.2, dram: 0.7}
devices:
  - {index: 1, activity: {sm: 0.9}}
mig:
  - {gpu: 1, instances: 2, memory_mib: 20000, busy: 1}
`)
	d0, _ := srv.DeviceGetHandleByIndex(0)
	d1, _ := srv.DeviceGetHandleByIndex(1)
	support, ret := d0.GpmQueryDeviceSupport()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(1), support.IsSupportedDevice)

	alloc := func() nvml.GpmSample {
		smp, allocRet := srv.GpmSampleAlloc()
		require.Equal(t, nvml.SUCCESS, allocRet)
		return smp
	}
	a, b, mig1a, mig1b, mig2a, mig2b, gpu1a, gpu1b := alloc(), alloc(), alloc(), alloc(), alloc(), alloc(), alloc(), alloc()
	assert.Equal(t, int64(8), srv.GPMSamplesLive())
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(a))
	require.Equal(t, nvml.SUCCESS, d1.GpmMigSampleGet(1, mig1a))
	require.Equal(t, nvml.SUCCESS, d1.GpmMigSampleGet(2, mig2a))
	require.Equal(t, nvml.SUCCESS, d1.GpmSampleGet(gpu1a))
	assert.Equal(t, nvml.ERROR_NOT_FOUND, d1.GpmMigSampleGet(3, b), "no such instance")
	setTo(c, 10*time.Second)
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(b))
	require.Equal(t, nvml.SUCCESS, d1.GpmMigSampleGet(1, mig1b))
	require.Equal(t, nvml.SUCCESS, d1.GpmMigSampleGet(2, mig2b))
	require.Equal(t, nvml.SUCCESS, d1.GpmSampleGet(gpu1b))

	// Idle for 5 s, busy for 5 s: the trapezoid between the two samples is a 50 % mean.
	ids := []nvml.GpmMetricId{
		nvml.GPM_METRIC_GRAPHICS_UTIL, nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY, nvml.GPM_METRIC_ANY_TENSOR_UTIL,
		nvml.GPM_METRIC_HMMA_TENSOR_UTIL, nvml.GPM_METRIC_IMMA_TENSOR_UTIL, nvml.GPM_METRIC_DFMA_TENSOR_UTIL,
		nvml.GPM_METRIC_FP64_UTIL, nvml.GPM_METRIC_FP32_UTIL, nvml.GPM_METRIC_FP16_UTIL, nvml.GPM_METRIC_DRAM_BW_UTIL,
		nvml.GPM_METRIC_PCIE_RX_PER_SEC, nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
		nvml.GPM_METRIC_INTEGER_UTIL,
	}
	values, rets := gpmMetrics(t, srv, a, b, ids...)
	want := []float64{50, 25, 10, 22.5, 15, 5, 2.5, 1.25, 7.5, 5, 35, 50 * 20_000 * 1024.0 / (1 << 20), 50 * 10_000 * 1024.0 / (1 << 20), 0.5 * nvlinkKiBPerSecond / 1024, 0}
	for i := range ids {
		if ids[i] == nvml.GPM_METRIC_INTEGER_UTIL {
			assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, rets[i], "a metric the simulation does not give")
			continue
		}
		assert.Equal(t, nvml.SUCCESS, rets[i], "metric %d", ids[i])
		assert.InDelta(t, want[i], values[i], 1e-9, "metric %d", ids[i])
	}

	// GPU 1's first instance runs at the GPU's signal with its activity, the second idles, and
	// the GPU is their sum by share (a quarter of the framebuffer each).
	values, _ = gpmMetrics(t, srv, mig1a, mig1b, nvml.GPM_METRIC_GRAPHICS_UTIL, nvml.GPM_METRIC_SM_UTIL)
	assert.InDeltaSlice(t, []float64{50, 45}, values, 1e-9)
	values, _ = gpmMetrics(t, srv, mig2a, mig2b, nvml.GPM_METRIC_GRAPHICS_UTIL)
	assert.InDeltaSlice(t, []float64{0}, values, 1e-9)
	values, _ = gpmMetrics(t, srv, gpu1a, gpu1b, nvml.GPM_METRIC_GRAPHICS_UTIL, nvml.GPM_METRIC_SM_UTIL)
	assert.InDeltaSlice(t, []float64{12.5, 11.25}, values, 1e-9)
	_, rets = gpmMetrics(t, srv, mig1a, mig1b, nvml.GPM_METRIC_PCIE_RX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC)
	assert.Equal(t, []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED}, rets, "the interconnects are the GPU's")

	m := &nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: b, Sample2: a}
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, srv.GpmMetricsGet(m), "the second sample must be the later")
	m = &nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: a, Sample2: mig1b}
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, srv.GpmMetricsGet(m), "two samples of one target")

	for _, smp := range []nvml.GpmSample{a, b, mig1a, mig1b, mig2a, mig2b, gpu1a, gpu1b} {
		require.Equal(t, nvml.SUCCESS, smp.Free())
	}
	assert.Zero(t, srv.GPMSamplesLive())
	assert.Zero(t, srv.GPMSamplesMisused())
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, d0.GpmSampleGet(a))
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, a.Free())
	assert.Equal(t, int64(2), srv.GPMSamplesMisused(), "a read into a freed sample and its second free")

	a100, _ := newServer(t, "profile: dgxa100\ngpus: 1\n")
	d, _ := a100.DeviceGetHandleByIndex(0)
	support, ret = d.GpmQueryDeviceSupport()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Zero(t, support.IsSupportedDevice)
	smp, _ := a100.GpmSampleAlloc()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, d.GpmSampleGet(smp))
}

// TestLimits: the profile's highest clocks and power limit range.
func TestLimits(t *testing.T) {
	srv, _ := newServer(t, "profile: dgxh100\ngpus: 1\n")
	d, _ := srv.DeviceGetHandleByIndex(0)
	sm, ret := d.GetMaxClockInfo(nvml.CLOCK_SM)
	require.Equal(t, nvml.SUCCESS, ret)
	mem, _ := d.GetMaxClockInfo(nvml.CLOCK_MEM)
	assert.Equal(t, []uint32{1980, 2619}, []uint32{sm, mem})
	minMW, maxMW, ret := d.GetPowerManagementLimitConstraints()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, []uint32{200_000, 700_000}, []uint32{minMW, maxMW})
}

// TestWhileRunning: a while_running process is listed while the host has its /proc entry, as
// NVML lists a process until it exits; the others follow the scenario's times only.
func TestWhileRunning(t *testing.T) {
	root := t.TempDir()
	sc, err := gpuscenario.Parse([]byte(`
profile: dgxa100
gpus: 1
processes:
  - {pid: 4242, gpu: 0, memory_mib: 100, sm: 40, while_running: true}
  - {pid: 4343, gpu: 0, memory_mib: 50, sm: 10}
`), "")
	require.NoError(t, err)
	srv := New(sc, clock.NewFake(time.Unix(0, 0)), WithHostRoot(root))
	t.Cleanup(srv.Close)
	d, _ := srv.DeviceGetHandleByIndex(0)
	pids := func() []uint32 {
		procs, ret := d.GetComputeRunningProcesses()
		require.Equal(t, nvml.SUCCESS, ret)
		var out []uint32
		for _, p := range procs {
			out = append(out, p.Pid)
		}
		return out
	}
	proc := filepath.Join(root, "proc", "4242")

	assert.Equal(t, []uint32{4343}, pids(), "4242 is not running")
	require.NoError(t, os.MkdirAll(proc, 0o755))
	assert.Equal(t, []uint32{4242, 4343}, pids(), "4242 runs")
	m, _ := d.GetMemoryInfo_v2()
	assert.Equal(t, uint64(150<<20), m.Used, "its memory is in use while it runs")
	require.NoError(t, os.Remove(proc))
	assert.Equal(t, []uint32{4343}, pids(), "4242 exited")
	m, _ = d.GetMemoryInfo_v2()
	assert.Equal(t, uint64(50<<20), m.Used, "and its memory is free")
}

func TestEventsDeliverEachXIDOnce(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxa100
faults:
  - {at: 10s, gpu: 2, kind: xid, xid: 79}
  - {at: 20s, gpu: 5, kind: xid, xid: 48}
`)
	set, _ := srv.EventSetCreate()
	for i := range 8 {
		d, _ := srv.DeviceGetHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, d.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	}
	// A wait of 0 ms returns at once when nothing is due; the clock never moves by itself.
	_, ret := set.Wait(0)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "nothing due yet")

	setTo(c, time.Minute)
	d2, _ := srv.DeviceGetHandleByIndex(2)
	ev, ret := set.Wait(0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, d2, ev.Device)
	assert.Equal(t, uint64(79), ev.EventData)
	ev, _ = set.Wait(0)
	assert.Equal(t, uint64(48), ev.EventData)
	_, ret = set.Wait(0)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "each XID once")

	_, ret = d2.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret, "XID 79 leaves the GPU lost, as on hardware")
}

// A wait sleeps until the next XID is due on the scenario's clock: moving the clock wakes it, long
// before its own timeout (an hour).
func TestEventWaitWakesWhenAnXIDIsDue(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxa100
faults:
  - {at: 10s, gpu: 3, kind: xid, xid: 43}
`)
	set, _ := srv.EventSetCreate()
	d3, _ := srv.DeviceGetHandleByIndex(3)
	require.Equal(t, nvml.SUCCESS, d3.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	got := make(chan nvml.EventData, 1)
	go func() {
		ev, _ := set.Wait(uint32(time.Hour / time.Millisecond))
		got <- ev
	}()
	setTo(c, 10*time.Second)
	select {
	case ev := <-got:
		assert.Equal(t, uint64(43), ev.EventData)
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not wake when its XID fell due")
	}
}

func TestHangBlocksUntilItEnds(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxa100
faults:
  - {at: 0s, gpu: 0, kind: hang, duration: 1m}
`)
	d0, _ := srv.DeviceGetHandleByIndex(0)
	returned := make(chan nvml.Return)
	go func() {
		_, ret := d0.GetPowerUsage()
		returned <- ret
	}()
	poll.Until(t, 10*time.Second, "the call to wait for the hang's end", func() bool { return c.Waiting() == 1 })
	select {
	case ret := <-returned:
		t.Fatalf("the call returned during the hang: %v", ret)
	default:
	}
	setTo(c, 2*time.Minute)
	select {
	case ret := <-returned:
		assert.Equal(t, nvml.SUCCESS, ret)
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return when the hang ended")
	}
}

// FuzzServer: a scenario that loads can be run without a panic.
func FuzzServer(f *testing.F) {
	f.Add([]byte("profile: dgxa100\n"))
	f.Add([]byte(`
profile: dgxh100
gpus: 2
signals:
  utilization: {random_walk: {min: 0, max: 100, step: 5, every: 1s}}
  temperature: {sine: {min: 30, max: 70, period: 1m}}
processes: [{pid: 1, gpu: 1, memory_mib: 10, sm: 50}, {pid: 2, gpu: 0, memory_mib: 10, sm: 5, while_running: true}]
faults: [{at: 1s, gpu: 0, kind: xid, xid: 79}, {at: 2s, gpu: 1, kind: ecc, uncorrected: 1}]
activity: {sm: 0.2, hmma: 0.1}
devices: [{index: 1, activity: {sm: 1, imma: 1, dram: 0.5}}]
mig: [{gpu: 1, instances: 3, memory_mib: 10000, used_mib: 10, busy: 2}]
`))
	f.Fuzz(func(_ *testing.T, data []byte) {
		sc, err := gpuscenario.Parse(data, "")
		if err != nil || sc.GPUs > 16 {
			return
		}
		hasHang := false
		for i := range sc.Faults {
			hasHang = hasHang || sc.Faults[i].Kind == gpuscenario.FaultHang
		}
		if hasHang {
			return // a hang blocks on purpose
		}
		c := clock.NewFake(time.Unix(0, 0))
		srv := New(sc, c)
		defer srv.Close()
		setTo(c, time.Hour)
		for i := range sc.GPUs {
			d, _ := srv.DeviceGetHandleByIndex(i)
			// Only that they answer without a panic.
			_, _ = d.GetUtilizationRates()
			_, _ = d.GetMemoryInfo()
			_, _ = d.GetTemperature(nvml.TEMPERATURE_GPU)
			_, _ = d.GetTotalEnergyConsumption()
			_, _ = d.GetProcessUtilization(0)
			smp, _ := srv.GpmSampleAlloc()
			_ = d.GpmSampleGet(smp)
			_ = d.GpmMigSampleGet(1, smp)
		}
	})
}

// TestFabric: Hopper and newer profiles are registered with a healthy fabric; a fabric_down
// fault leaves a GPU unregistered with its fabric manager disconnected, fabric_degraded degrades
// its bandwidth, both for as long as they last; the v1 call says the same without the mask. An
// A100's fabric is not NVML's to report.
func TestFabric(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxh100
faults:
  - {at: 0s, gpu: 0, kind: fabric_down, duration: 1m}
  - {at: 10s, gpu: 1, kind: fabric_degraded}
`)
	field := func(mask, shift, width uint32) uint32 { return mask >> shift & width }
	d0, _ := srv.DeviceGetHandleByIndex(0)
	d1, _ := srv.DeviceGetHandleByIndex(1)
	info, ret := d0.GetGpuFabricInfo_v4()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint8(nvml.GPU_FABRIC_STATE_NOT_STARTED), info.State)
	assert.Equal(t, uint32(nvml.GPU_FABRIC_HEALTH_MASK_GFM_STATE_DISCONNECTED), field(info.HealthMask, nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_GFM_STATE))
	v1, _ := d0.GetGpuFabricInfo()
	assert.Equal(t, uint8(nvml.GPU_FABRIC_STATE_NOT_STARTED), v1.State)
	info, _ = d1.GetGpuFabricInfo_v4()
	assert.Equal(t, uint32(fabricHealthy), info.HealthMask, "before its fault")

	setTo(c, 2*time.Minute)
	info, _ = d0.GetGpuFabricInfo_v4()
	assert.Equal(t, uint8(nvml.GPU_FABRIC_STATE_COMPLETED), info.State, "the fault ended")
	assert.Equal(t, uint32(fabricHealthy), info.HealthMask)
	info, _ = d1.GetGpuFabricInfo_v4()
	assert.Equal(t, uint32(nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE), field(info.HealthMask, nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW))
	assert.Equal(t, uint32(nvml.GPU_FABRIC_HEALTH_MASK_GFM_STATE_CONNECTED), field(info.HealthMask, nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_GFM_STATE))

	a100, _ := newServer(t, "profile: dgxa100\n")
	d, _ := a100.DeviceGetHandleByIndex(0)
	_, ret = d.GetGpuFabricInfo_v4()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
}

// TestNVLinkDown: an nvlink_down fault takes its one link down while it lasts.
func TestNVLinkDown(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxh100
faults:
  - {at: 10s, gpu: 3, kind: nvlink_down, link: 7, duration: 1m}
`)
	d, _ := srv.DeviceGetHandleByIndex(3)
	state := func(link int) nvml.EnableState { s, _ := d.GetNvLinkState(link); return s }
	assert.Equal(t, nvml.FEATURE_ENABLED, state(7))
	setTo(c, 30*time.Second)
	assert.Equal(t, nvml.FEATURE_DISABLED, state(7))
	assert.Equal(t, nvml.FEATURE_ENABLED, state(6))
	setTo(c, 2*time.Minute)
	assert.Equal(t, nvml.FEATURE_ENABLED, state(7), "the link came back")
}

// TestKernelLog: each delivered XID is written to the simulated kernel log in the driver's
// format, with its fault's message.
func TestKernelLog(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxb200
faults:
  - {at: 10s, gpu: 2, kind: xid, xid: 145, message: "RLW_REMAP Nonfatal XC0 i0 Link 02 (0x004505c6 0x00000000)"}
  - {at: 20s, gpu: 3, kind: xid, xid: 13}
`)
	log, err := srv.KernelLog()
	require.NoError(t, err)
	defer log.Close()
	set, _ := srv.EventSetCreate()
	for i := range 8 {
		d, _ := srv.DeviceGetHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, d.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	}
	setTo(c, time.Minute)
	for range 2 {
		_, ret := set.Wait(0)
		require.Equal(t, nvml.SUCCESS, ret)
	}
	// A bound on the reads, should the lines never come: a failure, not a hang.
	require.NoError(t, log.SetReadDeadline(time.Now().Add(10*time.Second)))
	lines := bufio.NewScanner(log)
	require.True(t, lines.Scan())
	assert.Equal(t, "NVRM: Xid (PCI:0000:03:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02 (0x004505c6 0x00000000)", lines.Text())
	require.True(t, lines.Scan())
	assert.Equal(t, "NVRM: Xid (PCI:0000:04:00): 13, pid='<unknown>', name=<unknown>, simulated", lines.Text())
}

// TestCollectiveWait: a GPU waiting in a collective keeps its kernels running (utilization
// rises to fill the wait) while its work, memory controller, NVLink and GPM activity shrink by
// the waiting share, and its power above idle falls to a tenth for the waiting share; in a
// hung collective (share 1) it is 100 % "utilized" doing nothing.
func TestCollectiveWait(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxh100
gpus: 3
signals:
  utilization: {constant: 80}
  power: {constant: 460}
activity: {sm: 0.5, dram: 0.5}
faults:
  - {at: 1m, gpu: 0, kind: collective_wait, share: 0.5, duration: 1m}
  - {at: 1m, gpu: 1, kind: collective_wait, share: 1}
`)
	devs := make([]nvml.Device, 3)
	for i := range devs {
		devs[i], _ = srv.DeviceGetHandleByIndex(i)
	}
	nvlink := func(d nvml.Device) uint64 {
		f := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: math.MaxUint32}}
		require.Equal(t, nvml.SUCCESS, d.GetFieldValues(f))
		return binary.NativeEndian.Uint64(f[0].Value[:])
	}
	samples := make([][2]nvml.GpmSample, len(devs)) // each GPU's at 70 s and at 90 s
	for i := range samples {
		samples[i][0], _ = srv.GpmSampleAlloc()
		samples[i][1], _ = srv.GpmSampleAlloc()
	}
	setTo(c, 60*time.Second)
	before := make([]uint64, len(devs))
	for i, d := range devs {
		before[i] = nvlink(d)
	}
	setTo(c, 70*time.Second)
	for i, d := range devs {
		require.Equal(t, nvml.SUCCESS, d.GpmSampleGet(samples[i][0]))
	}
	setTo(c, 90*time.Second)
	for i, d := range devs {
		require.Equal(t, nvml.SUCCESS, d.GpmSampleGet(samples[i][1]))
	}
	for i, want := range []struct {
		gpu, memory, mw uint32
		smActive        float64
		nvlinkSeconds   float64
	}{
		{gpu: 90, memory: 20, mw: 280_000, smActive: 20, nvlinkSeconds: 0.4 * 30},
		{gpu: 100, memory: 0, mw: 100_000, smActive: 0, nvlinkSeconds: 0},
		{gpu: 80, memory: 40, mw: 460_000, smActive: 40, nvlinkSeconds: 0.8 * 30},
	} {
		u, ret := devs[i].GetUtilizationRates()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, []uint32{want.gpu, want.memory}, []uint32{u.Gpu, u.Memory}, "GPU %d: utilization, memory controller", i)
		mw, _ := devs[i].GetPowerUsage()
		assert.Equal(t, want.mw, mw, "GPU %d: power", i)
		values, _ := gpmMetrics(t, srv, samples[i][0], samples[i][1], nvml.GPM_METRIC_SM_UTIL)
		assert.InDelta(t, want.smActive, values[0], 1e-9, "GPU %d: SM activity", i)
		assert.InDelta(t, want.nvlinkSeconds*nvlinkKiBPerSecond, float64(nvlink(devs[i])-before[i]), 1, "GPU %d: NVLink KiB from 60 s to 90 s", i)
	}
	for _, pair := range samples {
		for _, smp := range pair {
			require.Equal(t, nvml.SUCCESS, smp.Free())
		}
	}

	setTo(c, 3*time.Minute)
	u, _ := devs[0].GetUtilizationRates()
	assert.Equal(t, uint32(80), u.Gpu, "GPU 0's wait is over")
	u, _ = devs[1].GetUtilizationRates()
	assert.Equal(t, []uint32{100, 0}, []uint32{u.Gpu, u.Memory}, "GPU 1 hangs to the end")
}

// TestRecoveryAction: field 230 answers the recovery_action fault in force (none before and
// after it), and the event set delivers a recovery action event, without data, when it starts
// and when it ends, only to a set registered for that type.
func TestRecoveryAction(t *testing.T) {
	srv, c := newServer(t, `
profile: dgxa100
faults:
  - {at: 10s, gpu: 1, kind: recovery_action, action: drain_and_reset, duration: 20s}
  - {at: 15s, gpu: 3, kind: xid, xid: 48}
`)
	d1, _ := srv.DeviceGetHandleByIndex(1)
	action := func() uint32 {
		t.Helper()
		v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
		require.Equal(t, nvml.SUCCESS, d1.GetFieldValues(v))
		require.Equal(t, uint32(nvml.SUCCESS), v[0].NvmlReturn)
		return binary.NativeEndian.Uint32(v[0].Value[:4])
	}
	supported, _ := d1.GetSupportedEventTypes()
	assert.NotZero(t, supported&nvml.EventTypeGpuRecoveryAction)

	recovery, _ := srv.EventSetCreate()
	xids, _ := srv.EventSetCreate()
	for i := range 8 {
		d, _ := srv.DeviceGetHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, d.RegisterEvents(nvml.EventTypeGpuRecoveryAction, recovery))
		require.Equal(t, nvml.SUCCESS, d.RegisterEvents(nvml.EventTypeXidCriticalError, xids))
	}
	assert.Equal(t, uint32(nvml.GPU_RECOVERY_ACTION_NONE), action())
	setTo(c, 12*time.Second)
	assert.Equal(t, uint32(nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET), action())
	ev, ret := recovery.Wait(0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, d1, ev.Device)
	assert.Equal(t, uint64(nvml.EventTypeGpuRecoveryAction), ev.EventType)
	assert.Zero(t, ev.EventData)
	_, ret = recovery.Wait(0)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "once")

	setTo(c, 40*time.Second)
	assert.Equal(t, uint32(nvml.GPU_RECOVERY_ACTION_NONE), action(), "the action cleared")
	ev, ret = recovery.Wait(0)
	require.Equal(t, nvml.SUCCESS, ret, "the end is an event too")
	assert.Equal(t, uint64(nvml.EventTypeGpuRecoveryAction), ev.EventType)
	_, ret = recovery.Wait(0)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "no XID for a set registered for recovery actions only")

	ev, ret = xids.Wait(0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(48), ev.EventData)
	_, ret = xids.Wait(0)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "no recovery action event for a set registered for XIDs only")
}
