// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor

import (
	"cmp"
	"maps"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

// demoScenario is make demo's simulated DGX A100: the batch every profile renames.
var demoScenario = filepath.Join("..", "..", "distro", "scenarios", "dgx-a100-demo.yaml")

// demoBatch is one collection of the gpu receiver on the demo's GPUs, with the task_gpu_percent
// series gpu_attribution adds: GPU 0 held by one trainer, GPU 1 shared by two pods.
func demoBatch(tb testing.TB) pmetric.Metrics {
	tb.Helper()
	md, err := gpureceivertest.SimulatedBatch(demoScenario)
	require.NoError(tb, err)
	gpus := gpureceivertest.GPUs(md)
	addHolder(md, 0, gpus[0].UUID, "alice~train", "jobs", "train-0", "trainer")
	addHolder(md, 1, gpus[1].UUID, "bob~share", "jobs", "share-a", "worker")
	addHolder(md, 1, gpus[1].UUID, "carol~share", "jobs", "share-b", "worker")
	return md
}

// addHolder adds a task resource as gpu_attribution emits it (the keys the profiles read): the
// task on the resource, the GPU it holds on its task_gpu_percent point.
func addHolder(md pmetric.Metrics, minor int, uuid, job, namespace, pod, container string) {
	rm := md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.PutStr("node_name", "gpu-node-07")
	attrs.PutStr("job_name", job)
	attrs.PutStr("namespace", namespace)
	attrs.PutStr("pod_name", pod)
	attrs.PutStr("container_name", container)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("task_gpu_percent")
	m.SetUnit("%")
	pt := m.SetEmptyGauge().DataPoints().AppendEmpty()
	pt.SetDoubleValue(50)
	pt.Attributes().PutStr("minor_number", strconv.Itoa(minor))
	pt.Attributes().PutStr("uuid", uuid)
}

func runProfile(t *testing.T, profile Profile, batches ...pmetric.Metrics) []pmetric.Metrics {
	t.Helper()
	return runVersion(t, profile, DCGM48, batches...)
}

// runVersion runs the processor with the profile and dcgm_version (4.8 for other profiles).
func runVersion(t *testing.T, profile Profile, version DCGMVersion, batches ...pmetric.Metrics) []pmetric.Metrics {
	t.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Profile = profile
	cfg.DCGMVersion = version
	sink := &consumertest.MetricsSink{}
	p, err := f.CreateMetrics(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(t.Context(), nil))
	defer func() { require.NoError(t, p.Shutdown(t.Context())) }()
	for _, md := range batches {
		require.NoError(t, p.ConsumeMetrics(t.Context(), md))
	}
	return sink.AllMetrics()
}

var timeDependent = []string{
	"cmd_nvml_latency_seconds",
	"gpu_power_watts", "gpu_energy_joules_total", "gpu_nvlink_data_bytes_total",
	"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
	"DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
	"hw.power", "hw.energy",
}

// TestProfileGoldens renames the demo's whole batch under each profile, the dcgm profile in
// each generation, and compares it with testdata/expected/<golden>.yaml (go test -update
// rewrites them).
func TestProfileGoldens(t *testing.T) {
	for golden, tc := range map[string]struct {
		profile Profile
		version DCGMVersion
	}{
		"openpai":   {ProfileOpenPAI, DCGM48},
		"dcgm":      {ProfileDCGM, DCGM48},
		"dcgm-4.10": {ProfileDCGM, DCGM410},
		"semconv":   {ProfileSemconv, DCGM48},
	} {
		t.Run(golden, func(t *testing.T) {
			got := runVersion(t, tc.profile, tc.version, demoBatch(t))
			require.Len(t, got, 1)
			goldentest.Metrics(t, filepath.Join("testdata", "expected", golden+".yaml"), got[0],
				// Power and energy follow the simulation's clock, latency the machine's: their
				// values are checked against the collected ones by TestUnits.
				pmetrictest.IgnoreMetricValues(timeDependent...),
				pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp(),
				pmetrictest.IgnoreResourceMetricsOrder(), pmetrictest.IgnoreMetricsOrder(),
				pmetrictest.IgnoreMetricDataPointsOrder())
		})
	}
}

// TestOpenPAIIsTheCollectedBatch: the default profile changes nothing.
func TestOpenPAIIsTheCollectedBatch(t *testing.T) {
	collected := demoBatch(t)
	md := pmetric.NewMetrics()
	collected.CopyTo(md)
	got := runProfile(t, ProfileOpenPAI, md)
	require.Len(t, got, 1)
	require.NoError(t, pmetrictest.CompareMetrics(collected, got[0]))
}

// xidBatch is one GPU's device resource with its XID counters (code → count since start).
func xidBatch(start pcommon.Timestamp, counts map[string]int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("minor_number", "3")
	rm.Resource().Attributes().PutStr("uuid", "GPU-3")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	info := ms.AppendEmpty()
	info.SetName("gpu_info")
	info.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	xids := ms.AppendEmpty()
	xids.SetName("gpu_xid_errors_total")
	sum := xids.SetEmptySum()
	sum.SetIsMonotonic(true)
	for code, n := range counts {
		pt := sum.DataPoints().AppendEmpty()
		pt.Attributes().PutStr("xid", code)
		pt.SetIntValue(n)
		pt.SetStartTimestamp(start)
		pt.SetTimestamp(start + 1e9)
	}
	return md
}

// TestXIDLastValue: DCGM's XID field (4.8's DCGM_FI_DEV_XID_ERRORS, 4.10's
// DCGM_FI_DEV_XID_ERROR) is 0 until an XID happens, then the code that happened last, as
// dcgm-exporter reports it; gpu_xid_errors_total still counts every one.
func TestXIDLastValue(t *testing.T) {
	for version, name := range map[DCGMVersion]string{DCGM48: "DCGM_FI_DEV_XID_ERRORS", DCGM410: "DCGM_FI_DEV_XID_ERROR"} {
		t.Run(string(version), func(t *testing.T) { testXIDLastValue(t, version, name) })
	}
}

func testXIDLastValue(t *testing.T, version DCGMVersion, name string) {
	out := runVersion(t, ProfileDCGM, version,
		xidBatch(1e9, nil),
		xidBatch(1e9, map[string]int64{"13": 1}),
		xidBatch(1e9, map[string]int64{"13": 1}),
		xidBatch(1e9, map[string]int64{"13": 1, "79": 1}),
		xidBatch(1e9, map[string]int64{"13": 2, "79": 1}),
		xidBatch(1e9, map[string]int64{"13": 3, "48": 1, "79": 1}),
		xidBatch(1e9, map[string]int64{"13": 3, "48": 1, "79": 1}),
		// The receiver restarted: its counts begin again, and this 79 is a new one.
		xidBatch(5e9, map[string]int64{"79": 1}),
	)
	var last []int64
	for _, md := range out {
		rm := md.ResourceMetrics().At(0)
		m, ok := findMetric(rm, name)
		require.True(t, ok, "every GPU has %s", name)
		require.Equal(t, 1, m.Gauge().DataPoints().Len())
		last = append(last, m.Gauge().DataPoints().At(0).IntValue())
		_, counted := findMetric(rm, "gpu_xid_errors_total")
		assert.True(t, counted, "the counter stays beside it")
		gpu, _ := rm.Resource().Attributes().Get("gpu")
		assert.Equal(t, "3", gpu.Str())
	}
	// Two codes new in one batch cannot be ordered: the higher one is reported.
	assert.Equal(t, []int64{0, 13, 13, 79, 13, 48, 48, 79}, last)
}

// gpuValues are each GPU's values of one metric in a batch, by UUID (the resource's uuid or
// UUID), for the points whose attribute key has value (when key is set).
func gpuValues(md pmetric.Metrics, metric, key, value string) map[string]float64 {
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := resourceAttrs{rm.Resource().Attributes()}
		if res.has("job_name") {
			continue
		}
		m, ok := findMetric(rm, metric)
		if !ok {
			continue
		}
		pts, _ := metricpoints.Numbers(m)
		for j := 0; j < pts.Len(); j++ {
			pt := pts.At(j)
			attrs := resourceAttrs{pt.Attributes()}
			if key != "" && attrs.str(key) != value {
				continue
			}
			id := cmp.Or(res.str("uuid"), res.str("UUID"))
			if pt.ValueType() == pmetric.NumberDataPointValueTypeInt {
				out[id] = float64(pt.IntValue())
			} else {
				out[id] = pt.DoubleValue()
			}
		}
	}
	return out
}

// TestUnits: each profile's value is the collected one in the profile's unit, on every GPU.
func TestUnits(t *testing.T) {
	collected := demoBatch(t)
	// The batch renamed by each profile, the dcgm profile in each generation.
	renamed := map[string]pmetric.Metrics{}
	for output, cfg := range map[string]struct {
		profile Profile
		version DCGMVersion
	}{"dcgm": {ProfileDCGM, DCGM48}, "dcgm 4.10": {ProfileDCGM, DCGM410}, "semconv": {ProfileSemconv, DCGM48}} {
		md := pmetric.NewMetrics()
		collected.CopyTo(md)
		renamed[output] = runVersion(t, cfg.profile, cfg.version, md)[0]
	}
	same := func(v float64) float64 { return v }
	mib := func(b float64) float64 { return float64(int64(b) >> 20) }
	percentToRatio := func(p float64) float64 { return p / 100 }
	hertz := func(mhz float64) float64 { return mhz * 1e6 }
	for _, tc := range []struct {
		output               string // of renamed
		to, from, key, value string
		convert              func(float64) float64
		// toKey and toValue select the renamed points when several collected metrics share a name.
		toKey, toValue string
	}{
		{output: "dcgm", to: "DCGM_FI_DEV_FB_USED", from: "gpu_memory_used_bytes", convert: mib},
		{output: "dcgm", to: "DCGM_FI_DEV_FB_FREE", from: "gpu_memory_free_bytes", convert: mib},
		{output: "dcgm", to: "DCGM_FI_DEV_FB_RESERVED", from: "gpu_memory_reserved_bytes", convert: mib},
		{output: "dcgm", to: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", from: "gpu_energy_joules_total", convert: func(j float64) float64 { return j * 1000 }},
		{output: "dcgm", to: "DCGM_FI_DEV_GPU_UTIL", from: "gpu_utilization", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_MEM_COPY_UTIL", from: "gpu_memory_controller_utilization", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_ENC_UTIL", from: "gpu_codec_utilization", key: "codec", value: "encoder", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_DEC_UTIL", from: "gpu_codec_utilization", key: "codec", value: "decoder", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_MEMORY_TEMP", from: "gpu_memory_temperature_celsius", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_VGPU_LICENSE_STATUS", from: "gpu_vgpu_licensed", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION", from: "gpu_recovery_action", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_SM_CLOCK", from: "gpu_clock_mhz", key: "clock", value: "sm", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_MEM_CLOCK", from: "gpu_clock_mhz", key: "clock", value: "memory", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_POWER_USAGE", from: "gpu_power_watts", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", from: "gpu_power_limit_max_watts", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", from: "gpu_power_limit_min_watts", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_MAX_SM_CLOCK", from: "gpu_clock_max_mhz", key: "clock", value: "sm", convert: same},
		{output: "dcgm", to: "DCGM_FI_DEV_MAX_MEM_CLOCK", from: "gpu_clock_max_mhz", key: "clock", value: "memory", convert: same},
		// 4.10: the base units of DCGM 4.7's names.
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_SM_CLOCK_HERTZ", from: "gpu_clock_mhz", key: "clock", value: "sm", convert: hertz},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", from: "gpu_clock_mhz", key: "clock", value: "memory", convert: hertz},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", from: "gpu_clock_max_mhz", key: "clock", value: "sm", convert: hertz},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ", from: "gpu_clock_max_mhz", key: "clock", value: "memory", convert: hertz},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", from: "gpu_energy_joules_total", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_GPU_UTIL_RATIO", from: "gpu_utilization", convert: percentToRatio},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_FB_CAPACITY_BYTES", from: "gpu_memory_total_bytes", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_GPU_TEMP_CELSIUS", from: "nvidiasmi_temperature", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", from: "gpu_memory_temperature_celsius", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_BOARD_POWER_WATTS", from: "gpu_power_watts", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_BOARD_POWER_LIMIT_MAX_WATTS", from: "gpu_power_limit_max_watts", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_BOARD_POWER_LIMIT_MIN_WATTS", from: "gpu_power_limit_min_watts", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_VGPU_LICENSE_STATUS", from: "gpu_vgpu_licensed", convert: same},
		{output: "dcgm 4.10", to: "DCGM_FI_DEV_GPU_RECOVERY_ACTION", from: "gpu_recovery_action", convert: same},
		// 4.10's names of these are unknown: they keep the collected name and unit.
		{output: "dcgm 4.10", to: "gpu_memory_used_bytes", from: "gpu_memory_used_bytes", convert: same},
		{output: "dcgm 4.10", to: "gpu_memory_free_bytes", from: "gpu_memory_free_bytes", convert: same},
		{output: "dcgm 4.10", to: "gpu_memory_reserved_bytes", from: "gpu_memory_reserved_bytes", convert: same},
		{output: "dcgm 4.10", to: "gpu_memory_controller_utilization", from: "gpu_memory_controller_utilization", convert: same},
		{output: "dcgm 4.10", to: "gpu_codec_utilization", from: "gpu_codec_utilization", key: "codec", value: "encoder", convert: same, toKey: "codec", toValue: "encoder"},
		{output: "semconv", to: "hw.gpu.utilization", from: "gpu_utilization", convert: percentToRatio, toKey: "hw.gpu.task", toValue: "general"},
		{output: "semconv", to: "hw.gpu.utilization", from: "gpu_codec_utilization", key: "codec", value: "decoder", convert: percentToRatio, toKey: "hw.gpu.task", toValue: "decoder"},
		{output: "semconv", to: "hw.temperature", from: "gpu_memory_temperature_celsius", convert: same, toKey: "hw.sensor_location", toValue: "memory"},
		{output: "semconv", to: "hw.temperature", from: "nvidiasmi_temperature", convert: same, toKey: "hw.sensor_location", toValue: "gpu"},
		{output: "semconv", to: "hw.gpu.memory.usage", from: "gpu_memory_used_bytes", convert: same},
		{output: "semconv", to: "hw.energy", from: "gpu_energy_joules_total", convert: same},
	} {
		t.Run(tc.to+"/"+tc.from+tc.value, func(t *testing.T) {
			from := gpuValues(collected, tc.from, tc.key, tc.value)
			require.NotEmpty(t, from)
			want := map[string]float64{}
			for id, v := range from {
				want[id] = tc.convert(v)
			}
			got := gpuValues(renamed[tc.output], tc.to, tc.toKey, tc.toValue)
			require.Len(t, got, len(want))
			for id, v := range want {
				assert.InDelta(t, v, got[id], 1e-9, "GPU %s", id)
			}
		})
	}
}

// h100Scenario is make demo-dcgm's simulated DGX H100, which has GPM.
var h100Scenario = filepath.Join("..", "..", "distro", "scenarios", "dgx-h100-demo.yaml")

// instanceValues are a metric's values in a batch by GPU and MIG instance ("<uuid>/<instance>",
// the instance empty for the whole GPU's), for the points whose attribute key has value.
func instanceValues(md pmetric.Metrics, metric, key, value string) map[string]float64 {
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := resourceAttrs{rm.Resource().Attributes()}
		m, ok := findMetric(rm, metric)
		if !ok || res.has("job_name") {
			continue
		}
		pts, _ := metricpoints.Numbers(m)
		for j := 0; j < pts.Len(); j++ {
			attrs := resourceAttrs{pts.At(j).Attributes()}
			if key != "" && attrs.str(key) != value {
				continue
			}
			id := cmp.Or(res.str("uuid"), res.str("UUID")) + "/" + cmp.Or(attrs.str("gpu_instance_id"), attrs.str("GPU_I_ID"))
			out[id] = pts.At(j).DoubleValue()
		}
	}
	return out
}

// TestProfilingFields: on Hopper the dcgm profile's DCGM_FI_PROF_* are GPM's percents as DCGM's
// ratios (0-1) and its traffic in bytes per second, per GPU and per MIG instance (GPU_I_ID, as
// dcgm-exporter labels it), in both generations (4.10's names after the arrow); on the A100 they
// are absent, as NVML has none.
func TestProfilingFields(t *testing.T) {
	collected, err := gpureceivertest.SimulatedIntervalBatch(h100Scenario)
	require.NoError(t, err)
	renamed := map[DCGMVersion]pmetric.Metrics{}
	for _, version := range DCGMVersions {
		md := pmetric.NewMetrics()
		collected.CopyTo(md)
		renamed[version] = runVersion(t, ProfileDCGM, version, md)[0]
	}
	ratio := func(p float64) float64 { return p / 100 }
	same := func(v float64) float64 { return v }
	for _, tc := range []struct {
		to, to410, from, key, value string
		convert                     func(float64) float64
		instances                   bool
	}{
		{to: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", to410: "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", from: "gpu_graphics_engine_active_percent", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_SM_ACTIVE", to410: "DCGM_FI_PROF_SM_UTIL_RATIO", from: "gpu_sm_active_percent", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_SM_OCCUPANCY", to410: "DCGM_FI_PROF_SM_OCCUPANCY_RATIO", from: "gpu_sm_occupancy_percent", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", to410: "DCGM_FI_PROF_TENSOR_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "tensor", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", to410: "DCGM_FI_PROF_HMMA_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "tensor_hmma", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", to410: "DCGM_FI_PROF_IMMA_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "tensor_imma", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", to410: "DCGM_FI_PROF_DFMA_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "tensor_dfma", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_FP64_ACTIVE", to410: "DCGM_FI_PROF_FP64_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "fp64", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_FP32_ACTIVE", to410: "DCGM_FI_PROF_FP32_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "fp32", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PIPE_FP16_ACTIVE", to410: "DCGM_FI_PROF_FP16_UTIL_RATIO", from: "gpu_pipe_active_percent", key: "pipe", value: "fp16", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_DRAM_ACTIVE", to410: "DCGM_FI_PROF_DRAM_UTIL_RATIO", from: "gpu_dram_active_percent", convert: ratio, instances: true},
		{to: "DCGM_FI_PROF_PCIE_TX_BYTES", to410: "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", from: "gpu_pcie_average_bytes_per_second", key: "direction", value: "tx", convert: same},
		{to: "DCGM_FI_PROF_PCIE_RX_BYTES", to410: "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", from: "gpu_pcie_average_bytes_per_second", key: "direction", value: "rx", convert: same},
		{to: "DCGM_FI_PROF_NVLINK_TX_BYTES", to410: "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", from: "gpu_nvlink_average_bytes_per_second", key: "direction", value: "tx", convert: same},
		{to: "DCGM_FI_PROF_NVLINK_RX_BYTES", to410: "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", from: "gpu_nvlink_average_bytes_per_second", key: "direction", value: "rx", convert: same},
	} {
		for version, to := range map[DCGMVersion]string{DCGM48: tc.to, DCGM410: tc.to410} {
			t.Run(to, func(t *testing.T) {
				testProfilingField(t, collected, renamed[version], to, tc.from, tc.key, tc.value, tc.convert, tc.instances)
			})
		}
	}

	for _, version := range DCGMVersions {
		a100 := runVersion(t, ProfileDCGM, version, demoBatch(t))[0]
		for _, name := range []string{
			"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
			"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", "DCGM_FI_PROF_DRAM_UTIL_RATIO",
		} {
			assert.Empty(t, instanceValues(a100, name, "", ""), "%s on the A100, which has no GPM", name)
		}
	}
}

// testProfilingField checks one profiling field: every GPU (and MIG instance when instances)
// has it, the collected value converted.
func testProfilingField(t *testing.T, collected, renamed pmetric.Metrics, to, from, key, value string, convert func(float64) float64, instances bool) {
	want := instanceValues(collected, from, key, value)
	got := instanceValues(renamed, to, "", "")
	// Every GPU of the demo is up; GPU 6's two MIG instances have their own.
	n := 8
	if instances {
		n += 2
	}
	require.Len(t, want, n)
	require.Len(t, got, n)
	for id, v := range want {
		assert.InDelta(t, convert(v), got[id], 1e-9, "%s", id)
		if convert(1) != 1 {
			assert.True(t, got[id] >= 0 && got[id] <= 1, "a ratio: %s %v", id, got[id])
		}
	}
}

// nvlinkBatch is one GPU's device resource with its NVLink payload counters at at seconds.
func nvlinkBatch(start pcommon.Timestamp, at float64, rx, tx int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("minor_number", "3")
	rm.Resource().Attributes().PutStr("uuid", "GPU-3")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ms.AppendEmpty().SetName("gpu_info")
	ms.At(0).SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	m := ms.AppendEmpty()
	m.SetName("gpu_nvlink_data_bytes_total")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	for dir, n := range map[string]int64{"rx": rx, "tx": tx} {
		pt := sum.DataPoints().AppendEmpty()
		pt.Attributes().PutStr("direction", dir)
		pt.SetIntValue(n)
		pt.SetStartTimestamp(start)
		pt.SetTimestamp(pcommon.Timestamp(at * 1e9))
	}
	return md
}

// TestNVLinkBandwidth: DCGM's NVLink total is, as DCGM computes it, the growth of rx + tx per
// second since the previous batch: in 4.8 (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL) KiB per second
// divided by 1000, in 4.10 (DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL) bytes per second; 0 on the
// first batch and after the receiver restarted; the counter stays beside it.
func TestNVLinkBandwidth(t *testing.T) {
	for version, tc := range map[DCGMVersion]struct {
		name string
		want []int64
	}{
		DCGM48:  {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", []int64{0, 5000, 0, 1000, 0}},
		DCGM410: {"DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", []int64{0, 5_120_000_000, 0, 1_024_000_000, 0}},
	} {
		t.Run(string(version), func(t *testing.T) {
			const kib = 1024
			out := runVersion(t, ProfileDCGM, version,
				nvlinkBatch(1e9, 10, 0, 0),
				nvlinkBatch(1e9, 20, 30_000_000*kib, 20_000_000*kib), // 50e6 KiB in 10 s
				nvlinkBatch(1e9, 30, 30_000_000*kib, 20_000_000*kib), // idle
				nvlinkBatch(1e9, 32, 31_000_000*kib, 21_000_000*kib), // 2e6 KiB in 2 s
				nvlinkBatch(40e9, 41, 5*kib, 5*kib),                  // restarted
			)
			var got []int64
			for _, md := range out {
				rm := md.ResourceMetrics().At(0)
				m, ok := findMetric(rm, tc.name)
				require.True(t, ok)
				require.Equal(t, pmetric.MetricTypeSum, m.Type(), "dcgm-exporter's type, a counter")
				got = append(got, m.Sum().DataPoints().At(0).IntValue())
				_, kept := findMetric(rm, "gpu_nvlink_data_bytes_total")
				assert.True(t, kept)
			}
			assert.Equal(t, tc.want, got)

			// A GPU without NVLink has no counters and no DCGM series.
			md := xidBatch(1e9, nil)
			_, ok := findMetric(runVersion(t, ProfileDCGM, version, md)[0].ResourceMetrics().At(0), tc.name)
			assert.False(t, ok)
		})
	}
}

// amdBatch is one collection of the gpu receiver's amdgpu backend on an MI250X node's files,
// with a task holding GCD 0.
func amdBatch(t *testing.T) pmetric.Metrics {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, amdgpufixture.MI250X()))
	md, err := gpureceivertest.AMDBatch(root)
	require.NoError(t, err)
	gpus := gpureceivertest.GPUs(md)
	require.Len(t, gpus, 8)
	addHolder(md, 0, gpus[0].UUID, "dave~sim", "research", "sim-0", "solver")
	return md
}

// TestDCGMLeavesAMDGPUsOut: DCGM's fields are NVIDIA's, so an AMD GPU's device series are
// dropped; the node's and the task's are kept.
func TestDCGMLeavesAMDGPUsOut(t *testing.T) {
	got := runProfile(t, ProfileDCGM, amdBatch(t))
	require.Len(t, got, 1)
	rms := got[0].ResourceMetrics()
	var tasks, nodes int
	for i := range rms.Len() {
		attrs := rms.At(i).Resource().Attributes()
		_, gpu := attrs.Get("gpu")
		_, job := attrs.Get("job_name")
		assert.False(t, gpu && !job, "an AMD GPU's device resource is left out")
		switch {
		case job:
			tasks++
		case !gpu:
			nodes++
		}
	}
	assert.Equal(t, 1, tasks)
	assert.Equal(t, 1, nodes)
}

// TestSemconvAMD: an AMD GPU is named amd<index> with hw.vendor AMD, its edge and junction
// sensors are hw.temperature.
func TestSemconvAMD(t *testing.T) {
	got := runProfile(t, ProfileSemconv, amdBatch(t))
	require.Len(t, got, 1)
	var sensors []string
	rms := got[0].ResourceMetrics()
	for i := range rms.Len() {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := range ms.Len() {
			m := ms.At(j)
			if m.Name() != "hw.temperature" {
				continue
			}
			for k := range m.Gauge().DataPoints().Len() {
				attrs := m.Gauge().DataPoints().At(k).Attributes()
				vendor, _ := attrs.Get("hw.vendor")
				assert.Equal(t, "AMD", vendor.Str())
				name, _ := attrs.Get("hw.name")
				assert.Regexp(t, `^amd[0-7]$`, name.Str())
				if name.Str() == "amd0" {
					loc, _ := attrs.Get("hw.sensor_location")
					sensors = append(sensors, loc.Str())
				}
			}
		}
	}
	assert.ElementsMatch(t, []string{"edge", "junction", "memory"}, sensors)
}

// Names only one dcgm-exporter generation has (docs/metrics.md's table), metrics and labels.
var (
	onlyDCGM48 = []string{
		"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
		"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
		"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
		"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED",
		"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
		"DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_MAX_MEM_CLOCK",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
		"DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
		"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
		"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES",
		"label DCGM_FI_DRIVER_VERSION", "label Hostname",
	}
	onlyDCGM410 = []string{
		"DCGM_FI_DEV_SM_CLOCK_HERTZ", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
		"DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
		"DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_XID_ERROR", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
		"DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "DCGM_FI_DEV_ROW_REMAP_FAILED",
		"DCGM_FI_DEV_FB_CAPACITY_BYTES",
		"DCGM_FI_DEV_BOARD_POWER_LIMIT_MAX_WATTS", "DCGM_FI_DEV_BOARD_POWER_LIMIT_MIN_WATTS", "DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", "DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ",
		"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
		"DCGM_FI_PROF_HMMA_UTIL_RATIO", "DCGM_FI_PROF_IMMA_UTIL_RATIO", "DCGM_FI_PROF_DFMA_UTIL_RATIO",
		"DCGM_FI_PROF_FP64_UTIL_RATIO", "DCGM_FI_PROF_FP32_UTIL_RATIO", "DCGM_FI_PROF_FP16_UTIL_RATIO", "DCGM_FI_PROF_DRAM_UTIL_RATIO",
		"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND",
		"label DCGM_FI_SYSTEM_DRIVER_VERSION",
	}
	// What no readable source names in 4.10: the collected metrics stay, under their own names.
	keptIn410 = []string{"gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_memory_reserved_bytes", "gpu_memory_controller_utilization", "gpu_codec_utilization"}
)

// names are the metric names of a batch and, as "label <key>", the keys of its resources.
func names(md pmetric.Metrics) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		for k := range rm.Resource().Attributes().All() {
			out["label "+k] = true
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				out[ms.At(k).Name()] = true
			}
		}
	}
	return out
}

// TestDCGMGenerations: each dcgm_version emits every name of its generation on the demo's A100
// and H100 nodes (two batches, for the NVLink total) and none of the other's.
func TestDCGMGenerations(t *testing.T) {
	h100, err := gpureceivertest.SimulatedIntervalBatch(h100Scenario)
	require.NoError(t, err)
	for version, tc := range map[DCGMVersion]struct{ has, hasNot, kept []string }{
		DCGM48:  {onlyDCGM48, onlyDCGM410, nil},
		DCGM410: {onlyDCGM410, onlyDCGM48, keptIn410},
	} {
		t.Run(string(version), func(t *testing.T) {
			got := map[string]bool{}
			for _, batch := range []pmetric.Metrics{demoBatch(t), h100} {
				md := pmetric.NewMetrics()
				batch.CopyTo(md)
				for _, out := range runVersion(t, ProfileDCGM, version, md) {
					maps.Copy(got, names(out))
				}
			}
			for _, name := range tc.has {
				assert.True(t, got[name], "%s is missing", name)
			}
			for _, name := range tc.hasNot {
				assert.False(t, got[name], "%s leaks from the other generation", name)
			}
			for _, name := range tc.kept {
				assert.True(t, got[name], "%s keeps its name", name)
			}
			assert.True(t, got["label hostname"])
		})
	}
}
