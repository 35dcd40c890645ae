// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

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
	// xidLastValue adds DCGM_FI_DEV_XID_ERRORS, the last XID code seen, to each GPU.
	xidLastValue bool
	// nvlinkBandwidth adds DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, the NVLink traffic since the
	// previous batch, to each GPU with NVLink.
	nvlinkBandwidth bool
	// nvidiaOnly leaves AMD GPUs' device resources out of the batch: a vocabulary that has
	// names for NVIDIA GPUs only.
	nvidiaOnly bool
}

const mib = 1.0 / (1 << 20)

// dcgmMIGKeys is how dcgm-exporter labels a MIG instance's profiling series.
var dcgmMIGKeys = map[string]string{"gpu_instance_id": "GPU_I_ID"}

// dcgmRatio is a DCGM profiling field from a GPM percent: DCGM's ratio from 0 to 1, per GPU and
// per MIG instance.
func dcgmRatio(from string, where attribute, to, desc string) rename {
	r := rename{from: from, where: where, to: to, unit: "1", desc: desc, scale: 0.01, keys: dcgmMIGKeys}
	if where.key != "" {
		r.drop = []string{where.key}
	}
	return r
}

// dcgm is dcgm-exporter's default counter set (etc/default-counters.csv) where NVML gives the
// same quantity, with its units, types and help texts. The others are listed in the README.
var dcgm = profile{
	metrics: []rename{
		{from: "gpu_clock_mhz", where: attribute{"clock", "sm"}, to: "DCGM_FI_DEV_SM_CLOCK", unit: "MHz", desc: "SM clock frequency (in MHz).", drop: []string{"clock"}},
		{from: "gpu_clock_mhz", where: attribute{"clock", "memory"}, to: "DCGM_FI_DEV_MEM_CLOCK", unit: "MHz", desc: "Memory clock frequency (in MHz).", drop: []string{"clock"}},
		{from: "nvidiasmi_temperature", to: "DCGM_FI_DEV_GPU_TEMP", unit: "Cel", desc: "GPU temperature (in C)."},
		{from: "gpu_power_watts", to: "DCGM_FI_DEV_POWER_USAGE", unit: "W", desc: "Power draw (in W)."},
		{from: "gpu_energy_joules_total", to: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", unit: "mJ", desc: "Total energy consumption since boot (in mJ).", kind: counter, scale: 1000},
		{from: "gpu_pcie_replays_total", to: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", unit: "1", desc: "Total number of PCIe retries.", kind: counter},
		{from: "gpu_utilization", to: "DCGM_FI_DEV_GPU_UTIL", unit: "%", desc: "GPU utilization (in %).", drop: []string{"vender"}},
		{from: "gpu_memory_used_bytes", to: "DCGM_FI_DEV_FB_USED", unit: "MiBy", desc: "Framebuffer memory used (in MiB).", scale: mib},
		{from: "gpu_remapped_rows", where: attribute{"error_type", "uncorrected"}, to: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", unit: "1", desc: "Number of remapped rows for uncorrectable errors", kind: counter, drop: []string{"error_type"}},
		{from: "gpu_remapped_rows", where: attribute{"error_type", "corrected"}, to: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", unit: "1", desc: "Number of remapped rows for correctable errors", kind: counter, drop: []string{"error_type"}},
		{from: "gpu_remapped_rows_failed", to: "DCGM_FI_DEV_ROW_REMAP_FAILURE", unit: "1", desc: "Whether remapping of rows has failed"},
		{from: "gpu_memory_temperature_celsius", to: "DCGM_FI_DEV_MEMORY_TEMP", unit: "Cel", desc: "Memory temperature (in C)."},
		{from: "gpu_memory_controller_utilization", to: "DCGM_FI_DEV_MEM_COPY_UTIL", unit: "%", desc: "Memory utilization (in %)."},
		{from: "gpu_codec_utilization", where: attribute{"codec", "encoder"}, to: "DCGM_FI_DEV_ENC_UTIL", unit: "%", desc: "Encoder utilization (in %).", drop: []string{"codec"}},
		{from: "gpu_codec_utilization", where: attribute{"codec", "decoder"}, to: "DCGM_FI_DEV_DEC_UTIL", unit: "%", desc: "Decoder utilization (in %).", drop: []string{"codec"}},
		{from: "gpu_memory_free_bytes", to: "DCGM_FI_DEV_FB_FREE", unit: "MiBy", desc: "Framebuffer memory free (in MiB).", scale: mib},
		{from: "gpu_memory_reserved_bytes", to: "DCGM_FI_DEV_FB_RESERVED", unit: "MiBy", desc: "Framebuffer memory reserved (in MiB).", scale: mib},
		{from: "gpu_vgpu_licensed", to: "DCGM_FI_DEV_VGPU_LICENSE_STATUS", unit: "1", desc: "vGPU License status"},
		// What the OpenShift console plugin reads its limits from.
		{from: "gpu_power_limit_max_watts", to: "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", unit: "W", desc: "Maximum power management limit (in W)."},
		{from: "gpu_power_limit_min_watts", to: "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", unit: "W", desc: "Minimum power management limit (in W)."},
		{from: "gpu_clock_max_mhz", where: attribute{"clock", "sm"}, to: "DCGM_FI_DEV_MAX_SM_CLOCK", unit: "MHz", desc: "Maximum SM clock frequency (in MHz).", drop: []string{"clock"}},
		{from: "gpu_clock_max_mhz", where: attribute{"clock", "memory"}, to: "DCGM_FI_DEV_MAX_MEM_CLOCK", unit: "MHz", desc: "Maximum memory clock frequency (in MHz).", drop: []string{"clock"}},
		// DCGM's profiling fields (etc/dcp-metrics-included.csv) from GPM, Hopper and newer.
		dcgmRatio("gpu_graphics_engine_active_percent", attribute{}, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
		dcgmRatio("gpu_sm_active_percent", attribute{}, "DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."),
		dcgmRatio("gpu_sm_occupancy_percent", attribute{}, "DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "tensor"}, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "tensor_hmma"}, "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "Ratio of cycles the HMMA tensor pipe is active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "tensor_imma"}, "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "Ratio of cycles the IMMA tensor pipe is active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "tensor_dfma"}, "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "Ratio of cycles the DFMA tensor pipe is active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "fp64"}, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "fp32"}, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active."),
		dcgmRatio("gpu_pipe_active_percent", attribute{"pipe", "fp16"}, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active."),
		dcgmRatio("gpu_dram_active_percent", attribute{}, "DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data."),
		{from: "gpu_pcie_average_bytes_per_second", where: attribute{"direction", "tx"}, to: "DCGM_FI_PROF_PCIE_TX_BYTES", unit: "By/s", desc: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", drop: []string{"direction"}},
		{from: "gpu_pcie_average_bytes_per_second", where: attribute{"direction", "rx"}, to: "DCGM_FI_PROF_PCIE_RX_BYTES", unit: "By/s", desc: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", drop: []string{"direction"}},
		{from: "gpu_nvlink_average_bytes_per_second", where: attribute{"direction", "tx"}, to: "DCGM_FI_PROF_NVLINK_TX_BYTES", unit: "By/s", desc: "The rate of data transmitted over NVLink, including both protocol headers and data payloads, in bytes per second.", drop: []string{"direction"}},
		{from: "gpu_nvlink_average_bytes_per_second", where: attribute{"direction", "rx"}, to: "DCGM_FI_PROF_NVLINK_RX_BYTES", unit: "By/s", desc: "The rate of data received over NVLink, including both protocol headers and data payloads, in bytes per second.", drop: []string{"direction"}},
	},
	labelGPU: func(res resourceAttrs, id gpuIdentity) {
		res.rename("minor_number", "gpu")
		res.rename("uuid", "UUID")
		res.put("device", "nvidia"+id.minor)
		res.put("pci_bus_id", id.pciBusID)
		res.put("modelName", id.model)
		res.put("DCGM_FI_DRIVER_VERSION", id.driverVersion)
		// dcgm-exporter's releases up to 4.5.3-4.8.2 say Hostname, later ones hostname (#655).
		res.put("Hostname", id.nodeName)
		res.put("hostname", id.nodeName)
		if h, ok := id.soleHolder(); ok {
			res.put("namespace", h.namespace)
			res.put("pod", h.pod)
			res.put("container", h.container)
		}
	},
	gpuKeys:         map[string]string{"minor_number": "gpu", "uuid": "UUID"},
	xidLastValue:    true,
	nvlinkBandwidth: true,
	// dcgm-exporter's names are DCGM's fields, which exist for NVIDIA GPUs only.
	nvidiaOnly: true,
}

// semconv is OpenTelemetry's hardware semantic conventions (v1.43.0, the version of
// go.opentelemetry.io/otel v1.47.0 that collector v0.165.0 builds with), for OTLP backends.
var semconv = profile{
	metrics: []rename{
		{from: "gpu_utilization", to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{"vender"}, set: []attribute{{"hw.gpu.task", "general"}}},
		{from: "gpu_codec_utilization", where: attribute{"codec", "encoder"}, to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{"codec"}, set: []attribute{{"hw.gpu.task", "encoder"}}},
		{from: "gpu_codec_utilization", where: attribute{"codec", "decoder"}, to: "hw.gpu.utilization", unit: "1", desc: "Fraction of time spent in a specific task.", scale: 0.01, drop: []string{"codec"}, set: []attribute{{"hw.gpu.task", "decoder"}}},
		{from: "gpu_mem_utilization", to: "hw.gpu.memory.utilization", unit: "1", desc: "Fraction of GPU memory used.", scale: 0.01, drop: []string{"vender"}},
		{from: "gpu_memory_used_bytes", to: "hw.gpu.memory.usage", unit: "By", desc: "GPU memory used.", kind: upDown},
		{from: "gpu_memory_total_bytes", to: "hw.gpu.memory.limit", unit: "By", desc: "Size of the GPU memory.", kind: upDown},
		{from: "gpu_power_watts", to: "hw.power", unit: "W", desc: "Instantaneous power consumed by the component."},
		{from: "gpu_energy_joules_total", to: "hw.energy", unit: "J", desc: "Energy consumed by the component.", kind: counter},
		// hw.sensor_location tells the GPU's two sensors apart.
		{from: "nvidiasmi_temperature", to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "gpu"}}},
		{from: "gpu_memory_temperature_celsius", to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "memory"}}},
		// AMD GPUs' edge and junction (hotspot) sensors.
		{from: "rocmsmi_temperature", to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "edge"}}},
		{from: "gpu_junction_temperature_celsius", to: "hw.temperature", unit: "Cel", desc: "Temperature in degrees Celsius.", set: []attribute{{"hw.sensor_location", "junction"}}},
		{from: "gpu_xid_errors_total", to: "hw.errors", unit: "{error}", desc: "Number of errors encountered by the component.", kind: counter, set: []attribute{{"error.type", "xid"}}},
		{from: "gpu_pcie_replays_total", to: "hw.errors", unit: "{error}", desc: "Number of errors encountered by the component.", kind: counter, set: []attribute{{"error.type", "pcie_replay"}}},
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

func profileFor(name Profile) *profile {
	switch name {
	case ProfileDCGM:
		return &dcgm
	case ProfileSemconv:
		return &semconv
	}
	return nil // openpai: the names as collected
}
