// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// On NVSwitch systems (HGX/DGX Hopper and newer, GB200 NVL) the fabric manager registers each
// GPU with the NVLink fabric; until it has, the GPU cannot reach its peers and CUDA refuses to
// start on it. NVML reports the registration's state and, from the v3 struct on, a health mask
// of 2-bit (one 4-bit) fields, each 0 when the driver does not report it.

// fabricField is one field of NVML's fabric health mask (NVML_GPU_FABRIC_HEALTH_MASK_*): where it
// sits and its one healthy value; any other value it reports is a fault.
type fabricField struct {
	shift, width uint32
	healthy      uint32
	check        metadata.AttributeFabricCheck
}

var fabricFields = []fabricField{
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW, nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE, metadata.AttributeFabricCheckDegradedBandwidth},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY, nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE, metadata.AttributeFabricCheckRouteRecovery},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY, nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE, metadata.AttributeFabricCheckRouteUnhealthy},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY, nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE, metadata.AttributeFabricCheckAccessTimeoutRecovery},
	// 2 and up each name what is wrong with the configuration.
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION, nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE, metadata.AttributeFabricCheckIncorrectConfiguration},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_GFM_STATE, nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_GFM_STATE, nvml.GPU_FABRIC_HEALTH_MASK_GFM_STATE_CONNECTED, metadata.AttributeFabricCheckFabricManagerDisconnected},
}

// fabricInfo is what both NVML calls return; haveMask is false for the v1 call.
type fabricInfo struct {
	state    uint8
	status   uint32
	mask     uint32
	haveMask bool
}

// readFabric reports the GPU's fabric registration and health. A GPU without a fabric answers
// NOT_SUPPORTED (or state NOT_SUPPORTED) and reports nothing, never a 0.
func readFabric(r *gpuRead) {
	var info fabricInfo
	var ok bool
	switch {
	case r.s.lib.has(symFabricInfoV4):
		// The plain _v4 call, not GetGpuFabricInfoV's handler, which only a real library answers.
		info, ok = read(r, "GetGpuFabricInfo_v4", func() (fabricInfo, nvml.Return) {
			v, ret := r.dev.GetGpuFabricInfo_v4()
			return fabricInfo{state: v.State, status: v.Status, mask: v.HealthMask, haveMask: true}, ret
		})
	case r.s.lib.has(symFabricInfo):
		info, ok = read(r, "GetGpuFabricInfo", func() (fabricInfo, nvml.Return) {
			v, ret := r.dev.GetGpuFabricInfo()
			return fabricInfo{state: v.State, status: v.Status}, ret
		})
	}
	if !ok || info.state == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		return
	}
	r.mb.RecordGpuFabricStateDataPoint(r.now, int64(info.state))
	completed := info.state == nvml.GPU_FABRIC_STATE_COMPLETED
	if completed {
		r.mb.RecordGpuFabricStatusDataPoint(r.now, int64(info.status))
	}
	fault := !completed || nvml.Return(info.status) != nvml.SUCCESS
	if info.haveMask {
		for _, f := range fabricFields {
			v := info.mask >> f.shift & f.width
			if v == 0 { // not reported by this driver or GPU
				continue
			}
			failed := v != f.healthy
			fault = fault || failed
			r.mb.RecordGpuFabricHealthDataPoint(r.now, boolLevel(failed, 1), f.check)
		}
	}
	r.worst(metadata.AttributeConditionNvlink, boolLevel(fault, healthWarning))
}
