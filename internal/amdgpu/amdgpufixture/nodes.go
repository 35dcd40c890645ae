// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpufixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
)

// Where the values come from:
//   - MI300X: AMD Instinct MI300X data sheet and amd.com product page (192 GB HBM3, PCIe Gen5
//     x16, peak engine clock 2100 MHz, HBM3 at 5.2 Gbps i.e. a 1300 MHz memory clock, 750 W
//     total board power); PCI device id 0x74a1 (the kernel's amdgpu_drv.c PCI table and
//     pci.ids); 8 XCDs, 304 CUs (1216 SIMDs), so CPX mode makes 8 partitions of one XCD each
//     (the kernel's amdgpu_xcp.c and AMD's "MI300X GPU partitioning" documentation).
//   - MI250X: AMD Instinct MI250X data sheet (two GCDs per OAM, 64 GB HBM2e each, peak engine
//     clock 1700 MHz, HBM2e at 3.2 Gbps i.e. a 1600 MHz memory clock, 500 W per OAM, host link
//     PCIe Gen4 x16); PCI device id 0x740c; the OAM's power is reported on its first GCD only
//     (amdgpu reports none on the second die of an Aldebaran package).
//   - Units and file formats: the kernel's Documentation/gpu/amdgpu (thermal.rst: hwmon in
//     millidegrees, microwatts and Hz; driver-misc.rst: unique_id, gpu_busy_percent,
//     mem_info_vram_*, ras/*_err_count "ue:"/"ce:"; pp_dpm_* levels with "*"),
//     kgd_pp_interface.h for gpu_metrics, kfd_topology.c for the KFD properties, and the PCI
//     core's current_link_speed ("32.0 GT/s PCIe").
//   - gpu_metrics revisions: MI300X on a current kernel writes v1_7 (smu_v13_0_6_ppt.c);
//     MI250X writes v1_3 (aldebaran_ppt.c).
//   - Idle-to-busy values (temperatures, power, utilization) are plausible readings, not
//     measurements.

// rasBlocks are the RAS blocks an MI200/MI300 driver lists under ras/.
var rasBlocks = []string{"umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl"}

func noRASErrors() map[string]amdgpu.ErrcountRAS {
	m := map[string]amdgpu.ErrcountRAS{}
	for _, b := range rasBlocks {
		m[b] = amdgpu.ErrcountRAS{}
	}
	return m
}

func milli(c int) *int { v := c * 1000; return &v }

// MI300XGPU is MI300X number i of a node (PCI addresses as on a typical 8-GPU OAM platform),
// busy at busy percent.
func MI300XGPU(i, busy int) GPU {
	buses := []int{0x05, 0x15, 0x65, 0x75, 0x85, 0x95, 0xe5, 0xf5}
	const vram = 192 << 30
	power := uint64(140+busy*5) * 1e6 // µW: 140 W idle to 640 W busy
	return GPU{
		PCIAddress:    fmt.Sprintf("0000:%02x:00.0", buses[i%len(buses)]),
		PCIDeviceID:   "74a1",
		ProductName:   "AMD Instinct MI300X OAM",
		UniqueID:      0x4b7a3c1e9d2f0500 + uint64(i),
		GPUID:         uint32(10000 + 1000*i),
		Partitionable: true,
		BusyPercent:   busy, MemBusyPercent: busy / 2,
		VRAMTotal: vram, VRAMUsed: uint64(vram/100) * uint64(busy/2+1),
		LinkSpeed: "32.0 GT/s PCIe", MaxLinkSpeed: "32.0 GT/s PCIe", LinkWidth: 16, MaxLinkWidth: 16,
		SclkLevelsMHz: []int{500, 1420, 2100}, SclkLevel: 1,
		MclkLevelsMHz: []int{900, 1100, 1200, 1300}, MclkLevel: 3,
		JunctionMilliC: 45000 + busy*300, MemMilliC: 40000 + busy*200,
		PowerMicroW: power, PowerInput: true,
		PowerCapMicroW: 750e6, PowerCapMinMicroW: 0, PowerCapMaxMicroW: 750e6,
		RAS: noRASErrors(),
		Metrics: &GPUMetrics{Revision: amdgpu.Revision{Format: 1, Content: 7}, Values: map[string]uint64{
			"temperature_hotspot":   uint64(45 + busy*3/10),
			"temperature_mem":       uint64(40 + busy/5),
			"curr_socket_power":     power / 1e6,
			"average_gfx_activity":  uint64(busy),
			"average_umc_activity":  uint64(busy / 2),
			"energy_accumulator":    uint64(3_600_000) << 16, // 1 kWh in 15.259 µJ units
			"accumulation_counter":  1000,
			"prochot_residency_acc": 0, "ppt_residency_acc": 0, "socket_thm_residency_acc": 0,
			"vr_thm_residency_acc": 0, "hbm_thm_residency_acc": 0,
			"pcie_link_width": 16, "pcie_link_speed": 320,
			"current_gfxclk": 1420, "current_uclk": 1300,
		}},
	}
}

// MI300X is an 8-GPU MI300X node, each GPU whole (SPX mode), two processes on GPU 0 and 1.
func MI300X() Node {
	n := Node{CPUNodes: 2, DriverVersion: "6.10.5", KernelRelease: "6.8.0-49-generic"}
	for i := range 8 {
		n.GPUs = append(n.GPUs, MI300XGPU(i, 10*i))
	}
	n.Processes = []Process{
		{PID: 4242, GPU: 0, VRAMBytes: 20 << 30},
		{PID: 5151, GPU: 1, VRAMBytes: 8 << 30},
		{PID: 5152, GPU: 1, VRAMBytes: 0},
	}
	return n
}

// MI300XCPX is an MI300X node whose GPUs are in CPX mode: 8 partitions each, 64 in all.
func MI300XCPX(gpus int) Node { return MI300XPartitioned(gpus, 8) }

// MI300XPartitioned is an MI300X node whose GPUs have partitions partitions each (1 SPX, 2
// DPX, 4 QPX, 8 CPX), a process on partition 0 and one on partition 3 (the last one in DPX).
func MI300XPartitioned(gpus, partitions int) Node {
	n := Node{CPUNodes: 2, DriverVersion: "6.10.5", KernelRelease: "6.8.0-49-generic"}
	for i := range gpus {
		g := MI300XGPU(i, 50)
		g.Partitions = partitions
		n.GPUs = append(n.GPUs, g)
	}
	n.Processes = []Process{
		{PID: 4242, GPU: 0, Partition: 0, VRAMBytes: 10 << 30},
		{PID: 4343, GPU: 0, Partition: min(3, partitions-1), VRAMBytes: 12 << 30},
	}
	return n
}

// MI308XGPU is MI308X number i of a node: an MI300X with 4 XCDs (80 CUs), its PCI addresses
// and unique_ids those of the MI308X node whose KFD topology ROCm/k8s-device-plugin captured
// (testdata/topology-parsing-mi308, see internal/amdgpu/testdata), in 2 PCI domains.
func MI308XGPU(i, busy int) GPU {
	addresses := []string{"0000:0a:00.0", "0000:80:00.0", "0000:a4:00.0", "0000:c8:00.0", "0001:0b:00.0", "0001:81:00.0", "0001:a5:00.0", "0001:c9:00.0"}
	uniqueIDs := []uint64{598046273873802902, 11803749423592941193, 10187445671099294242, 9604994527082705072, 17466021589395472075, 1044926823201815193, 13372828617950681944, 6576958293045616595}
	g := MI300XGPU(i, busy)
	g.PCIAddress, g.UniqueID = addresses[i%len(addresses)], uniqueIDs[i%len(uniqueIDs)]
	g.PCIDeviceID, g.ProductName = "74a2", "AMD Instinct MI308X OAM"
	g.GPUID = uint32(30000 + 1000*i)
	return g
}

// MI308XPartitioned is an 8-GPU MI308X node whose GPUs have partitions partitions each (1 SPX,
// 2 DPX, 4 CPX), with a process on each GPU's last partition.
func MI308XPartitioned(partitions int) Node {
	n := Node{CPUNodes: 2, DriverVersion: "6.10.5", KernelRelease: "6.8.0-49-generic"}
	for i := range 8 {
		g := MI308XGPU(i, 40)
		g.Partitions = partitions
		n.GPUs = append(n.GPUs, g)
		n.Processes = append(n.Processes, Process{PID: 6000 + i, GPU: i, Partition: partitions - 1, VRAMBytes: uint64(i+1) << 30})
	}
	return n
}

// MI250XGCD is GCD i of an MI250X node (GCDs 2k and 2k+1 are OAM k's two dies).
func MI250XGCD(i, busy int) GPU {
	buses := []int{0x29, 0x2c, 0x2f, 0x32, 0xa9, 0xac, 0xaf, 0xb2}
	const vram = 64 << 30
	g := GPU{
		PCIAddress:  fmt.Sprintf("0000:%02x:00.0", buses[i%len(buses)]),
		PCIDeviceID: "740c",
		ProductName: "AMD Instinct MI250X",
		UniqueID:    0x2f1e5d7c3b9a0800 + uint64(i),
		GPUID:       uint32(20000 + 1000*i),
		BusyPercent: busy, MemBusyPercent: busy / 3,
		VRAMTotal: vram, VRAMUsed: uint64(vram/100) * uint64(busy/3+1),
		LinkSpeed: "16.0 GT/s PCIe", MaxLinkSpeed: "16.0 GT/s PCIe", LinkWidth: 16, MaxLinkWidth: 16,
		SclkLevelsMHz: []int{500, 800, 1700}, SclkLevel: 1,
		MclkLevelsMHz: []int{400, 1600}, MclkLevel: 1,
		EdgeMilliC: milli(36 + busy/5), JunctionMilliC: 40000 + busy*300, MemMilliC: 44000 + busy*150,
		RAS: noRASErrors(),
	}
	power := uint64(0)
	if i%2 == 0 {
		power = uint64(120+busy*3) * 1e6
		g.PowerMicroW = power
		g.PowerCapMicroW, g.PowerCapMinMicroW, g.PowerCapMaxMicroW = 500e6, 0, 500e6
	}
	values := map[string]uint64{
		"temperature_edge":     uint64(36 + busy/5),
		"temperature_hotspot":  uint64(40 + busy*3/10),
		"temperature_mem":      uint64(44 + busy*15/100),
		"average_gfx_activity": uint64(busy),
		"average_umc_activity": uint64(busy / 3),
		"energy_accumulator":   uint64(1_800_000) << 16,
		"throttle_status":      0, "indep_throttle_status": 0,
		"pcie_link_width": 16, "pcie_link_speed": 160,
		"current_gfxclk": 800, "current_uclk": 1600,
	}
	if power > 0 {
		values["average_socket_power"] = power / 1e6
	}
	g.Metrics = &GPUMetrics{Revision: amdgpu.Revision{Format: 1, Content: 3}, Values: values}
	return g
}

// MI250X is a node of 4 MI250X OAMs, 8 GCDs, one process on GCD 2.
func MI250X() Node {
	n := Node{CPUNodes: 4, KernelRelease: "5.14.21-150500.55.49-default"}
	for i := range 8 {
		n.GPUs = append(n.GPUs, MI250XGCD(i, 12*i))
	}
	n.Processes = []Process{{PID: 7007, GPU: 2, VRAMBytes: 30 << 30}}
	return n
}
