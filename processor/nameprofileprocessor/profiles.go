// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// kind is the type a renamed metric leaves with.
type kind int

const (
	gauge   kind = iota
	counter      // monotonic cumulative sum
	upDown       // non-monotonic cumulative sum (an OpenTelemetry UpDownCounter)
)

// rename is one metric of a profile: the data points of the collected metric from (those
// whose attribute where.key is where.value, when set) under a new name, unit, type and scale.
type rename struct {
	from  string
	where attribute // optional
	to    string
	unit  string
	desc  string
	kind  kind
	scale float64 // 0 leaves values as they are; integer points are truncated
	// drop are data point attributes the new name makes redundant; set are added; keys are
	// renamed.
	drop []string
	set  []attribute
	keys map[string]string
}

type attribute struct{ key, value string }

// A profile maps the collected names to another vocabulary.
type profile struct {
	metrics []rename
	// labelGPU relabels a resource of one GPU's device metrics (it has minor_number and uuid and
	// no task); identity is the GPU's facts gathered from the batch.
	labelGPU func(res resourceAttrs, id gpuIdentity)
	// gpuKeys renames the GPU identity keys everywhere else (task resources, data points).
	gpuKeys map[string]string
	// pointIdentity adds the GPU's identity to each renamed data point (the semantic
	// conventions put hw.id and hw.type on the measurement).
	pointIdentity func(id gpuIdentity) []attribute
	// recordXID, when set, records the last XID code seen on a GPU (DCGM's XID field).
	recordXID func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, code int64)
	// recordNVLink, when set, records a GPU's NVLink traffic, rx + tx, since the previous batch
	// (DCGM's NVLink total): bytes in seconds, seconds 0 on the first batch and after the
	// counters restarted.
	recordNVLink func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, bytes int64, seconds float64)
	// nvidiaOnly leaves AMD GPUs' device resources out of the batch: a vocabulary that has
	// names for NVIDIA GPUs only.
	nvidiaOnly bool
}

const mib = 1.0 / (1 << 20)

// dcgmMIGKeys is how dcgm-exporter labels a MIG instance's profiling series.
var dcgmMIGKeys = map[string]string{gpunames.KeyGPUInstanceID: "GPU_I_ID"}

// dcgmName is a DCGM field's name in one dcgm-exporter generation: its unit, help text and the
// scale from the collected value (0: as collected).
type dcgmName struct {
	to, unit, desc string
	scale          float64
}

// dcgmField is one DCGM field the dcgm profile emits: where it comes from and what each
// generation calls it. docs/metrics.md's table gives each 4.10 name's source.
type dcgmField struct {
	from  string
	where attribute // optional
	kind  kind
	drop  []string // point attributes the name makes redundant, besides where's
	// migKeys: a profiling field, per GPU and per MIG instance (GPU_I_ID).
	migKeys bool
	// v48 and v410 are its names in dcgm-exporter 4.8 and 4.10; nil where that generation has
	// none or no readable source gives it: the collected metric then keeps its own name.
	v48, v410 *dcgmName
}

// rename is the field's rename in generation v, false where it has none in v.
func (f dcgmField) rename(v DCGMVersion) (rename, bool) {
	n := f.v48
	if v == DCGM410 {
		n = f.v410
	}
	if n == nil {
		return rename{}, false
	}
	r := rename{from: f.from, where: f.where, to: n.to, unit: n.unit, desc: n.desc, kind: f.kind, scale: n.scale}
	r.drop = f.drop
	if f.where.key != "" {
		r.drop = append([]string{f.where.key}, f.drop...)
	}
	if f.migKeys {
		r.keys = dcgmMIGKeys
	}
	return r, true
}

const (
	hertzPerMHz = 1e6
	percent     = 0.01 // a percent's ratio from 0 to 1
)

// dcgmProfiling is a DCGM profiling field from a GPM percent, a ratio from 0 to 1 in both
// generations, per GPU and per MIG instance.
func dcgmProfiling(from string, where attribute, v48, v410, desc string) dcgmField {
	return dcgmField{
		from: from, where: where, migKeys: true,
		v48:  &dcgmName{v48, "1", desc, percent},
		v410: &dcgmName{v410, "1", desc, percent},
	}
}

// dcgmFields are dcgm-exporter's default counter set (etc/default-counters.csv, 4.8) where NVML
// gives the same quantity, with its units, types and help texts, and DCGM's profiling fields
// (etc/dcp-metrics-included.csv) from GPM, Hopper and newer. The others are listed in the README.
// 4.10's help texts are not readable anywhere: they are ours, in 4.8's style.
var dcgmFields = []dcgmField{
	{
		from: gpunames.GPUClockMHz, where: attribute{gpunames.KeyClock, gpunames.ClockSM},
		v48:  &dcgmName{"DCGM_FI_DEV_SM_CLOCK", "MHz", "SM clock frequency (in MHz).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_SM_CLOCK_HERTZ", "Hz", "SM clock frequency (in Hz).", hertzPerMHz},
	},
	{
		from: gpunames.GPUClockMHz, where: attribute{gpunames.KeyClock, gpunames.ClockMemory},
		v48:  &dcgmName{"DCGM_FI_DEV_MEM_CLOCK", "MHz", "Memory clock frequency (in MHz).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "Hz", "Memory clock frequency (in Hz).", hertzPerMHz},
	},
	{
		from: gpunames.NvidiasmiTemperature,
		v48:  &dcgmName{"DCGM_FI_DEV_GPU_TEMP", "Cel", "GPU temperature (in C).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_GPU_TEMP_CELSIUS", "Cel", "GPU temperature (in C).", 0},
	},
	{
		from: gpunames.GPUPowerWatts,
		v48:  &dcgmName{"DCGM_FI_DEV_POWER_USAGE", "W", "Power draw (in W).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_BOARD_POWER_WATTS", "W", "Power draw (in W).", 0},
	},
	{
		from: gpunames.GPUEnergyJoulesTotal, kind: counter,
		v48:  &dcgmName{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "mJ", "Total energy consumption since boot (in mJ).", 1000},
		v410: &dcgmName{"DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "J", "Total energy consumption since the driver was loaded (in J).", 0},
	},
	{
		from: gpunames.GPUPCIeReplaysTotal, kind: counter,
		v48:  &dcgmName{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "1", "Total number of PCIe retries.", 0},
		v410: &dcgmName{"DCGM_FI_DEV_PCIE_REPLAY_TOTAL", "1", "Total number of PCIe retries.", 0},
	},
	{
		from: gpunames.GPUUtilization, drop: []string{gpunames.KeyVender},
		v48:  &dcgmName{"DCGM_FI_DEV_GPU_UTIL", "%", "GPU utilization (in %).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_GPU_UTIL_RATIO", "1", "GPU utilization (ratio from 0 to 1).", percent},
	},
	{
		from: gpunames.GPUMemoryUsedBytes,
		v48:  &dcgmName{"DCGM_FI_DEV_FB_USED", "MiBy", "Framebuffer memory used (in MiB).", mib},
	},
	{
		from: gpunames.GPURemappedRows, where: attribute{gpunames.KeyErrorType, gpunames.ErrorTypeUncorrected}, kind: counter,
		v48:  &dcgmName{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "1", "Number of remapped rows for uncorrectable errors", 0},
		v410: &dcgmName{"DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "1", "Number of remapped rows for uncorrectable errors.", 0},
	},
	{
		from: gpunames.GPURemappedRows, where: attribute{gpunames.KeyErrorType, gpunames.ErrorTypeCorrected}, kind: counter,
		v48:  &dcgmName{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "1", "Number of remapped rows for correctable errors", 0},
		v410: &dcgmName{"DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "1", "Number of remapped rows for correctable errors.", 0},
	},
	{
		from: gpunames.GPURemappedRowsFailed,
		v48:  &dcgmName{"DCGM_FI_DEV_ROW_REMAP_FAILURE", "1", "Whether remapping of rows has failed", 0},
		v410: &dcgmName{"DCGM_FI_DEV_ROW_REMAP_FAILED", "1", "Whether remapping of rows has failed.", 0},
	},
	{
		from: gpunames.GPUMemoryTemperatureCelsius,
		v48:  &dcgmName{"DCGM_FI_DEV_MEMORY_TEMP", "Cel", "Memory temperature (in C).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", "Cel", "Memory temperature (in C).", 0},
	},
	{
		from: gpunames.GPUMemoryControllerUtilization,
		v48:  &dcgmName{"DCGM_FI_DEV_MEM_COPY_UTIL", "%", "Memory utilization (in %).", 0},
	},
	{
		from: gpunames.GPUCodecUtilization, where: attribute{gpunames.KeyCodec, gpunames.CodecEncoder},
		v48: &dcgmName{"DCGM_FI_DEV_ENC_UTIL", "%", "Encoder utilization (in %).", 0},
	},
	{
		from: gpunames.GPUCodecUtilization, where: attribute{gpunames.KeyCodec, gpunames.CodecDecoder},
		v48: &dcgmName{"DCGM_FI_DEV_DEC_UTIL", "%", "Decoder utilization (in %).", 0},
	},
	{
		from: gpunames.GPUMemoryFreeBytes,
		v48:  &dcgmName{"DCGM_FI_DEV_FB_FREE", "MiBy", "Framebuffer memory free (in MiB).", mib},
	},
	{
		from: gpunames.GPUMemoryReservedBytes,
		v48:  &dcgmName{"DCGM_FI_DEV_FB_RESERVED", "MiBy", "Framebuffer memory reserved (in MiB).", mib},
	},
	{
		// 4.9 collects the framebuffer's size by default; 4.8 has no field for it.
		from: gpunames.GPUMemoryTotalBytes,
		v410: &dcgmName{"DCGM_FI_DEV_FB_CAPACITY_BYTES", "By", "Framebuffer memory total (in B).", 0},
	},
	{
		from: gpunames.GPUVGPULicensed,
		v48:  &dcgmName{"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "1", "vGPU License status", 0},
		v410: &dcgmName{"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "1", "vGPU License status", 0},
	},
	{
		// Not a default counter: DCGM's field 1523 is NVML's recovery action, as the receiver reads it.
		from: gpunames.GPURecoveryAction,
		v48:  &dcgmName{"DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION", "1", "GPU Recovery Action (see nvmlDeviceGpuRecoveryAction_t for return values)", 0},
		v410: &dcgmName{"DCGM_FI_DEV_GPU_RECOVERY_ACTION", "1", "GPU Recovery Action (see nvmlDeviceGpuRecoveryAction_t for return values)", 0},
	},
	// What the OpenShift console plugin reads its limits from.
	{
		from: gpunames.GPUPowerLimitMaxWatts,
		v48:  &dcgmName{"DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", "W", "Maximum power management limit (in W).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_BOARD_POWER_LIMIT_MAX_WATTS", "W", "Maximum power management limit (in W).", 0},
	},
	{
		from: gpunames.GPUPowerLimitMinWatts,
		v48:  &dcgmName{"DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", "W", "Minimum power management limit (in W).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_BOARD_POWER_LIMIT_MIN_WATTS", "W", "Minimum power management limit (in W).", 0},
	},
	{
		from: gpunames.GPUClockMaxMHz, where: attribute{gpunames.KeyClock, gpunames.ClockSM},
		v48:  &dcgmName{"DCGM_FI_DEV_MAX_SM_CLOCK", "MHz", "Maximum SM clock frequency (in MHz).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", "Hz", "Maximum SM clock frequency (in Hz).", hertzPerMHz},
	},
	{
		from: gpunames.GPUClockMaxMHz, where: attribute{gpunames.KeyClock, gpunames.ClockMemory},
		v48:  &dcgmName{"DCGM_FI_DEV_MAX_MEM_CLOCK", "MHz", "Maximum memory clock frequency (in MHz).", 0},
		v410: &dcgmName{"DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ", "Hz", "Maximum memory clock frequency (in Hz).", hertzPerMHz},
	},
	dcgmProfiling(gpunames.GPUGraphicsEngineActivePercent, attribute{}, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "Ratio of time the graphics engine is active."),
	dcgmProfiling(gpunames.GPUSMActivePercent, attribute{}, "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO", "The ratio of cycles an SM has at least 1 warp assigned."),
	dcgmProfiling(gpunames.GPUSMOccupancyPercent, attribute{}, "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "The ratio of number of warps resident on an SM."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeTensor}, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", "Ratio of cycles the tensor (HMMA) pipe is active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeTensorHMMA}, "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "DCGM_FI_PROF_HMMA_UTIL_RATIO", "Ratio of cycles the HMMA tensor pipe is active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeTensorIMMA}, "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "DCGM_FI_PROF_IMMA_UTIL_RATIO", "Ratio of cycles the IMMA tensor pipe is active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeTensorDFMA}, "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "DCGM_FI_PROF_DFMA_UTIL_RATIO", "Ratio of cycles the DFMA tensor pipe is active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeFP64}, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_FP64_UTIL_RATIO", "Ratio of cycles the fp64 pipes are active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeFP32}, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_FP32_UTIL_RATIO", "Ratio of cycles the fp32 pipes are active."),
	dcgmProfiling(gpunames.GPUPipeActivePercent, attribute{gpunames.KeyPipe, gpunames.PipeFP16}, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_FP16_UTIL_RATIO", "Ratio of cycles the fp16 pipes are active."),
	dcgmProfiling(gpunames.GPUDRAMActivePercent, attribute{}, "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO", "Ratio of cycles the device memory interface is active sending or receiving data."),
	{
		from: gpunames.GPUPCIeAverageBytesPerSecond, where: attribute{gpunames.KeyDirection, gpunames.DirectionTX},
		v48:  &dcgmName{"DCGM_FI_PROF_PCIE_TX_BYTES", "By/s", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", 0},
		v410: &dcgmName{"DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "By/s", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", 0},
	},
	{
		from: gpunames.GPUPCIeAverageBytesPerSecond, where: attribute{gpunames.KeyDirection, gpunames.DirectionRX},
		v48:  &dcgmName{"DCGM_FI_PROF_PCIE_RX_BYTES", "By/s", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", 0},
		v410: &dcgmName{"DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", "By/s", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", 0},
	},
	{
		from: gpunames.GPUNVLinkAverageBytesPerSecond, where: attribute{gpunames.KeyDirection, gpunames.DirectionTX},
		v48:  &dcgmName{"DCGM_FI_PROF_NVLINK_TX_BYTES", "By/s", "The rate of data transmitted over NVLink, including both protocol headers and data payloads, in bytes per second.", 0},
		v410: &dcgmName{"DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", "By/s", "The rate of data transmitted over NVLink, including both protocol headers and data payloads, in bytes per second.", 0},
	},
	{
		from: gpunames.GPUNVLinkAverageBytesPerSecond, where: attribute{gpunames.KeyDirection, gpunames.DirectionRX},
		v48:  &dcgmName{"DCGM_FI_PROF_NVLINK_RX_BYTES", "By/s", "The rate of data received over NVLink, including both protocol headers and data payloads, in bytes per second.", 0},
		v410: &dcgmName{"DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", "By/s", "The rate of data received over NVLink, including both protocol headers and data payloads, in bytes per second.", 0},
	},
}

// dcgmLabels are the names a generation gives the driver-version label and the node name.
type dcgmLabels struct {
	driverVersion string
	hostnames     []string
}

// newDCGM is the dcgm profile in dcgm-exporter generation v.
func newDCGM(v DCGMVersion) *profile {
	p := &profile{
		gpuKeys: map[string]string{gpunames.KeyMinorNumber: "gpu", gpunames.KeyUUID: "UUID"},
		// dcgm-exporter's names are DCGM's fields, which exist for NVIDIA GPUs only.
		nvidiaOnly: true,
	}
	for _, f := range dcgmFields {
		if r, ok := f.rename(v); ok {
			p.metrics = append(p.metrics, r)
		}
	}
	// Releases up to 4.5.3-4.8.2 say Hostname, 4.8.3 and later hostname (#655): 4.8 has both,
	// so either dashboard works. 4.9 renamed the driver label.
	labels := dcgmLabels{"DCGM_FI_DRIVER_VERSION", []string{"Hostname", "hostname"}}
	p.recordXID = func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, code int64) {
		mb.RecordDCGMFIDEVXIDERRORSDataPoint(ts, code)
	}
	// In KiB per second / 1000 (MB/s), as DCGM computes it (DcgmCacheManager).
	p.recordNVLink = func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, bytes int64, seconds float64) {
		var mbps int64
		if seconds > 0 {
			mbps = int64(float64(bytes) / 1024 / seconds / 1000)
		}
		mb.RecordDCGMFIDEVNVLINKBANDWIDTHTOTALDataPoint(ts, mbps)
	}
	if v == DCGM410 {
		labels = dcgmLabels{"DCGM_FI_SYSTEM_DRIVER_VERSION", []string{"hostname"}}
		p.recordXID = func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, code int64) {
			mb.RecordDCGMFIDEVXIDERRORDataPoint(ts, code)
		}
		p.recordNVLink = func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, bytes int64, seconds float64) {
			var bps int64
			if seconds > 0 {
				bps = int64(float64(bytes) / seconds)
			}
			mb.RecordDCGMFIDEVNVLINKTHROUGHPUTTOTALDataPoint(ts, bps)
		}
	}
	p.labelGPU = func(res resourceAttrs, id gpuIdentity) {
		res.rename(gpunames.KeyMinorNumber, "gpu")
		res.rename(gpunames.KeyUUID, "UUID")
		res.put("device", "nvidia"+id.minor)
		res.put(gpunames.KeyPCIBusID, id.pciBusID)
		res.put("modelName", id.model)
		res.put(labels.driverVersion, id.driverVersion)
		for _, k := range labels.hostnames {
			res.put(k, id.nodeName)
		}
		if h, ok := id.soleHolder(); ok {
			res.put("namespace", h.namespace)
			res.put("pod", h.pod)
			res.put("container", h.container)
		}
	}
	return p
}

var (
	dcgm48  = newDCGM(DCGM48)
	dcgm410 = newDCGM(DCGM410)
)

// semconv is OpenTelemetry's hardware semantic conventions (v1.43.0, the version of
// go.opentelemetry.io/otel v1.47.0 that collector v0.165.0 builds with), for OTLP backends.
var semconv = profile{
	metrics: []rename{
		{from: gpunames.GPUUtilization, to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{gpunames.KeyVender}, set: []attribute{{"hw.gpu.task", "general"}}},
		{from: gpunames.GPUCodecUtilization, where: attribute{gpunames.KeyCodec, gpunames.CodecEncoder}, to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{gpunames.KeyCodec}, set: []attribute{{"hw.gpu.task", "encoder"}}},
		{from: gpunames.GPUCodecUtilization, where: attribute{gpunames.KeyCodec, gpunames.CodecDecoder}, to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{gpunames.KeyCodec}, set: []attribute{{"hw.gpu.task", "decoder"}}},
		{from: gpunames.GPUMemUtilization, to: "hw.gpu.memory.utilization", unit: "1", desc: "Fraction of GPU memory used.", scale: 0.01, drop: []string{gpunames.KeyVender}},
		{from: gpunames.GPUMemoryUsedBytes, to: "hw.gpu.memory.usage", unit: "By", desc: "GPU memory used.", kind: upDown},
		{from: gpunames.GPUMemoryTotalBytes, to: "hw.gpu.memory.limit", unit: "By", desc: "Size of the GPU memory.", kind: upDown},
		{from: gpunames.GPUPowerWatts, to: "hw.power", unit: "W", desc: "Instantaneous power consumed by the component."},
		{from: gpunames.GPUEnergyJoulesTotal, to: "hw.energy", unit: "J", desc: "Energy consumed by the component.", kind: counter},
		// hw.sensor_location tells the GPU's two sensors apart.
		{from: gpunames.NvidiasmiTemperature, to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "gpu"}}},
		{from: gpunames.GPUMemoryTemperatureCelsius, to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "memory"}}},
		// AMD GPUs' edge and junction (hotspot) sensors.
		{from: gpunames.RocmsmiTemperature, to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "edge"}}},
		{from: gpunames.GPUJunctionTemperatureCelsius, to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "junction"}}},
		{from: gpunames.GPUXIDErrorsTotal, to: "hw.errors", unit: "{error}", desc: "Number of errors encountered by the component.", kind: counter, set: []attribute{{"error.type", "xid"}}},
		{from: gpunames.GPUPCIeReplaysTotal, to: "hw.errors", unit: "{error}", desc: "Number of errors encountered by the component.", kind: counter, set: []attribute{{"error.type", "pcie_replay"}}},
	},
	pointIdentity: func(id gpuIdentity) []attribute {
		name, vendor := "nvidia", "NVIDIA"
		if id.amd() {
			name, vendor = "amd", "AMD"
		}
		return []attribute{
			{"hw.id", id.uuid},
			{"hw.type", "gpu"},
			{"hw.name", name + id.minor},
			{"hw.vendor", vendor},
			{"hw.model", id.model},
			{"hw.driver_version", id.driverVersion},
		}
	},
}

func profileFor(name Profile, dcgmVersion DCGMVersion) *profile {
	switch name {
	case ProfileDCGM:
		if dcgmVersion == DCGM410 {
			return dcgm410
		}
		return dcgm48
	case ProfileSemconv:
		return &semconv
	}
	return nil // openpai: the names as collected
}
