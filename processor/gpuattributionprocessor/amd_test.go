// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// amdGPU is one resource of the gpu receiver's amdgpu backend as the interface of issue 24 fixes
// it: a whole GPU, or one compute partition of a GPU (partitionDevice set: the kernel device
// ROCm's device plugin allocates it by, the PCI address for the partition that is the PCI
// device itself, amdgpu_xcp_N for the others; all of a GPU's partitions share its pci_bus_id).
type amdGPU struct {
	minor                     int
	pciBusID, partitionDevice string
	util, memUtil             float64
	// vram is each process's bytes on the GPU, from the KFD's proc/<pid>/vram_<gpu_id>; no
	// process has an SM utilization (the KFD has none).
	vram map[int]int64
}

// uuid is the receiver's GPU-<unique_id> (16 lowercase hex digits); a partition's is its own.
func (g amdGPU) uuid() string { return fmt.Sprintf("GPU-%016x", 0x4b2c1a9f8d3e6f00+g.minor) }

// amdBatch is what the amdgpu backend emits for gpus at one collection.
func amdBatch(gpus ...amdGPU) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	for _, g := range gpus {
		rm := md.ResourceMetrics().AppendEmpty()
		res := rm.Resource().Attributes()
		res.PutStr("minor_number", strconv.Itoa(g.minor))
		res.PutStr("uuid", g.uuid())
		res.PutStr("node_name", "mi300x-node-01")
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		gauge := func(name string) pmetric.NumberDataPoint {
			m := ms.AppendEmpty()
			m.SetName(name)
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			return dp
		}
		info := gauge("gpu_info")
		info.SetIntValue(1)
		info.Attributes().PutStr("model", "AMD Instinct MI300X")
		info.Attributes().PutStr("pci_bus_id", g.pciBusID)
		info.Attributes().PutStr("driver_version", "6.10.5")
		if g.partitionDevice != "" {
			info.Attributes().PutStr("partition_device", g.partitionDevice)
		}
		for name, v := range map[string]float64{"gpu_utilization": g.util, "gpu_mem_utilization": g.memUtil} {
			dp := gauge(name)
			dp.SetDoubleValue(v)
			dp.Attributes().PutStr("vender", "amd")
		}
		if len(g.vram) > 0 {
			m := ms.AppendEmpty()
			m.SetName("gpu_process_memory_used_bytes")
			dps := m.SetEmptyGauge().DataPoints()
			for pid, bytes := range g.vram {
				dp := dps.AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetIntValue(bytes)
				dp.Attributes().PutStr("pid", strconv.Itoa(pid))
			}
		}
	}
	return md
}

const gib = 1 << 30

// The AMD test node: an MI300X node, six whole GPUs and one in DPX mode (two partitions, the
// second an amdgpu_xcp platform device), which ROCm's device plugin serves with
// -resource_naming_strategy=mixed (amd.com/spx_nps1, amd.com/dpx_nps2).
var amdGPUs = []amdGPU{
	{minor: 0, pciBusID: "0000:05:00.0", util: 70, memUtil: 40, vram: map[int]int64{2101: 60 * gib}},
	{minor: 1, pciBusID: "0000:26:00.0", util: 50, memUtil: 35, vram: map[int]int64{2102: 50 * gib}},
	// Shared by two OpenPAI jobs: 3 GiB of bob's, 1 GiB of carol's.
	{minor: 2, pciBusID: "0000:46:00.0", util: 80, memUtil: 30, vram: map[int]int64{2201: 3 * gib, 2301: 1 * gib}},
	{minor: 3, pciBusID: "0000:65:00.0", util: 20, memUtil: 10, vram: map[int]int64{2401: 2 * gib}},
	{minor: 4, pciBusID: "0000:85:00.0", util: 90, memUtil: 60, vram: map[int]int64{2501: 9 * gib}},
	// A host process, a zombie container's, and a job whose ROCR_VISIBLE_DEVICES names index 5,
	// which counts its container's GPUs, not the node's.
	{minor: 5, pciBusID: "0000:a6:00.0", util: 15, memUtil: 5, vram: map[int]int64{4001: 1 * gib, 4002: 0}},
	{minor: 6, pciBusID: "0000:c6:00.0", partitionDevice: "0000:c6:00.0", util: 40, memUtil: 25, vram: map[int]int64{2701: 8 * gib}},
	{minor: 7, pciBusID: "0000:c6:00.0", partitionDevice: "amdgpu_xcp_42", util: 60, memUtil: 45, vram: map[int]int64{2801: 12 * gib}},
}

// Container numbers of the AMD test node.
const (
	amdTrainer  = 21 // GPUs 0 and 1, by the device plugin
	amdBob      = 22 // GPU 2, PAI_AMD_VISIBLE_DEVICES
	amdCarol    = 23 // GPU 2, PAI_AMD_VISIBLE_DEVICES
	amdROCR     = 24 // GPU 3, ROCR_VISIBLE_DEVICES (its UUID upper-case)
	amdHIP      = 25 // GPU 4: HIP_VISIBLE_DEVICES=1 among ROCR's GPUs 5 and 4
	amdRelative = 26 // ROCR_VISIBLE_DEVICES=5 and two malformed items: no GPU
	amdInfer0   = 27 // partition 0 of the DPX GPU, by its PCI address
	amdInfer1   = 28 // partition 1, by amdgpu_xcp_42
	amdZombie   = 29 // its pod is gone
)

func amdHost() hostfixture.Host {
	uuid := func(minor int) string { return amdGPUs[minor].uuid() }
	logs := func(ns, name, ctr string) *hostfixture.PodLogs {
		return &hostfixture.PodLogs{Namespace: ns, Name: name, Container: ctr}
	}
	return hostfixture.Host{
		CgroupVersion: 2,
		Processes:     []hostfixture.Process{{PID: 4001, Comm: "rocm-bandwidth", Cmdline: []string{"/opt/rocm/bin/rocm-bandwidth-test"}, State: "S", RSSPages: 100}},
		Pods: []hostfixture.Pod{
			pod(amdTrainer, logs("team-a", "llama-0", "trainer"), []int{2101, 2102}, paiEnv("alice", "llama")...),
			pod(amdBob, logs("team-b", "explore-bob", "main"), []int{2201}, append(paiEnv("bob", "explore"), "PAI_AMD_VISIBLE_DEVICES=2")...),
			pod(amdCarol, logs("team-c", "explore-carol", "main"), []int{2301}, append(paiEnv("carol", "explore"), "PAI_AMD_VISIBLE_DEVICES=2")...),
			pod(amdROCR, logs("team-d", "rocr-0", "main"), []int{2401}, append(paiEnv("dave", "rocr"), "ROCR_VISIBLE_DEVICES="+strings.ToUpper(uuid(3)))...),
			pod(amdHIP, logs("team-e", "hip-0", "main"), []int{2501}, append(paiEnv("erin", "hip"), "ROCR_VISIBLE_DEVICES="+uuid(5)+","+uuid(4), "HIP_VISIBLE_DEVICES=1")...),
			pod(amdRelative, logs("team-f", "relative-0", "main"), []int{2601}, append(paiEnv("frank", "relative"), "ROCR_VISIBLE_DEVICES=5,GPU-,nope")...),
			pod(amdInfer0, logs("serving", "infer-0", "server"), []int{2701}, paiEnv("grace", "infer")...),
			pod(amdInfer1, logs("serving", "infer-1", "server"), []int{2801}, paiEnv("heidi", "infer")...),
			pod(amdZombie, nil, []int{4002}, paiEnv("ivan", "old")...),
		},
	}
}

// amdKubeletPods is what the kubelet lists on the AMD node: ROCm's device plugin's ids.
func amdKubeletPods() []*v1.PodResources {
	c, pod := podresourcestest.Container, podresourcestest.Pod
	return []*v1.PodResources{
		pod("team-a", "llama-0", c("trainer", "amd.com/spx_nps1", "0000:05:00.0", "0000:26:00.0")),
		pod("team-b", "explore-bob", c("main", "")),
		pod("team-c", "explore-carol", c("main", "")),
		pod("team-d", "rocr-0", c("main", "")),
		pod("team-e", "hip-0", c("main", "")),
		pod("team-f", "relative-0", c("main", "")),
		pod("serving", "infer-0", c("server", "amd.com/dpx_nps2", "0000:c6:00.0")),
		pod("serving", "infer-1", c("server", "amd.com/dpx_nps2", "amdgpu_xcp_42")),
	}
}

func startAMDKubelet(t *testing.T) *podresourcestest.Server {
	srv, err := podresourcestest.NewServer(filepath.Join(socketDir(t), "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetPods(amdKubeletPods()...)
	return srv
}

// TestAMDAttribution: an AMD node with the default configuration. ROCm's device plugin's PCI
// addresses give whole GPUs, its partition devices each partition; the environment gives the
// GPUs the kubelet gives nobody (OpenPAI's minor numbers, ROCm's UUIDs, HIP's index among
// ROCR's UUIDs), never by an index that counts the container's GPUs; the GPU two jobs share is
// split by their processes' VRAM, as the KFD gives no per-process utilization; the host process
// is external and the container whose pod is gone a zombie.
func TestAMDAttribution(t *testing.T) {
	batch := amdBatch(amdGPUs...)
	e := newTestEnv(t, amdHost(), startAMDKubelet(t))
	e.advance(5 * time.Minute)
	e.refresh()
	out := e.process(batch)
	compareGolden(t, "amd", out)

	byJob := points(out, "job_name", "minor_number")
	util, mem := byJob["task_gpu_percent"], byJob["task_gpu_mem_percent"]
	for _, gpu := range []string{"0", "1"} {
		g := amdGPUs[mustAtoi(t, gpu)]
		assert.Equal(t, g.util, util["alice~llama|"+gpu].value, "the device plugin's PCI address: the whole GPU's utilization")
		assert.Equal(t, g.memUtil, mem["alice~llama|"+gpu].value)
	}
	assert.InDelta(t, 80*3.0/4, util["bob~explore|2"].value, 1e-9, "bob's processes hold 3 of the GPU's 4 GiB")
	assert.InDelta(t, 80*1.0/4, util["carol~explore|2"].value, 1e-9)
	assert.InDelta(t, 30*3.0/4, mem["bob~explore|2"].value, 1e-9)
	assert.InDelta(t, 30*1.0/4, mem["carol~explore|2"].value, 1e-9)

	assert.Equal(t, 20.0, util["dave~rocr|3"].value, "ROCR_VISIBLE_DEVICES's UUID, whatever its case")
	assert.Equal(t, 90.0, util["erin~hip|4"].value, "HIP_VISIBLE_DEVICES=1: the second of ROCR's GPUs")
	assert.NotContains(t, util, "erin~hip|5", "ROCR's first GPU, which HIP hides")
	for key := range util {
		assert.False(t, strings.HasPrefix(key, "frank~relative|"), "an index of ROCR_VISIBLE_DEVICES counts the container's GPUs: %s", key)
	}

	assert.Equal(t, 40.0, util["grace~infer|6"].value, "partition 0, by its PCI address")
	assert.Equal(t, 60.0, util["heidi~infer|7"].value, "partition 1, by amdgpu_xcp_42")
	assert.Equal(t, 45.0, mem["heidi~infer|7"].value)
	assert.NotContains(t, util, "grace~infer|7", "a partition's PCI address names that partition, not its siblings")
	assert.Len(t, util, 8, "no other holder")

	byGPU := points(out, "node_name", "minor_number", "pid", "container_id", "type", "source")
	assert.Equal(t, map[string]point{"mi300x-node-01|5|4001|||": {value: 1}}, byGPU["gpu_used_by_external_process_count"])
	assert.Equal(t, map[string]point{"mi300x-node-01|5||" + ctrID(amdZombie) + "||": {value: 1}}, byGPU["gpu_used_by_zombie_container_count"], "a process holding 0 bytes still holds the GPU")
	assert.Equal(t, 1.0, byGPU["zombie_container_count"]["mi300x-node-01||||pod_gone|"].value)
	errs := byGPU["gpu_attribution_source_errors_total"]
	assert.Equal(t, 2.0, errs["mi300x-node-01|||||amd_visible_devices"].value, `"GPU-" and "nope"`)
	assert.Equal(t, 0.0, errs["mi300x-node-01|||||nvidia_visible_devices"].value)
	assert.Equal(t, 0.0, errs["mi300x-node-01|||||pod_resources"].value)
}

// TestAMDProcesses: with the processes as the only source, each container holds the GPUs its
// processes are on, and a GPU several hold is split by their VRAM: the shares add up to the
// device.
func TestAMDProcesses(t *testing.T) {
	e := newTestEnv(t, amdHost(), nil, func(cfg *Config) { cfg.AllocationSources = []Source{SourceProcess} })
	e.advance(5 * time.Minute)
	e.refresh()
	util := points(e.process(amdBatch(amdGPUs...)), "job_name", "minor_number")["task_gpu_percent"]
	assert.InDelta(t, 60, util["bob~explore|2"].value, 1e-9)
	assert.InDelta(t, 20, util["carol~explore|2"].value, 1e-9)
	assert.Equal(t, 70.0, util["alice~llama|0"].value)
	assert.Equal(t, 60.0, util["heidi~infer|7"].value, "a partition is a GPU of its own")
	for key := range util {
		assert.False(t, strings.HasPrefix(key, "frank~relative|"), "no process of frank's on any GPU: %s", key)
		assert.False(t, strings.HasPrefix(key, "ivan~old|"), "a zombie holds nothing: %s", key)
	}
}

// TestAMDResourceNames: resource_names decide which of the kubelet's resources are GPUs; a
// configuration without ROCm's partition names leaves the partitions to the next source.
func TestAMDResourceNames(t *testing.T) {
	e := newTestEnv(t, amdHost(), startAMDKubelet(t), func(cfg *Config) {
		cfg.AllocationSources = []Source{SourcePodResources}
		cfg.PodResources.ResourceNames = []string{"amd.com/spx_nps1"}
	})
	util := points(e.process(amdBatch(amdGPUs...)), "job_name", "minor_number")["task_gpu_percent"]
	assert.Contains(t, util, "alice~llama|0")
	assert.NotContains(t, util, "grace~infer|6")
	assert.NotContains(t, util, "heidi~infer|7")
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// TestVisibleDevices: what each environment source takes from a container's variables.
func TestVisibleDevices(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		want      visibleDevices
		malformed map[Source]int
	}{
		{"nothing", map[string]string{"HOME": "/root"}, nil, nil},
		{"NVIDIA indices and UUIDs", map[string]string{"NVIDIA_VISIBLE_DEVICES": "0, GPU-ab,MIG-cd"}, visibleDevices{SourceNvidiaVisibleDevices: {"0", "GPU-ab", "MIG-cd"}}, nil},
		{"NVIDIA all", map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}, nil, nil},
		{"OpenPAI's minor numbers decide", map[string]string{"PAI_AMD_VISIBLE_DEVICES": "1,3", "ROCR_VISIBLE_DEVICES": "GPU-00aa"}, visibleDevices{SourceAMDVisibleDevices: {"1", "3"}}, nil},
		{"OpenPAI's malformed", map[string]string{"PAI_AMD_VISIBLE_DEVICES": "1,GPU-00aa,x"}, visibleDevices{SourceAMDVisibleDevices: {"1"}}, map[Source]int{SourceAMDVisibleDevices: 2}},
		{"ROCR's UUIDs lowercased, indices unknowable", map[string]string{"ROCR_VISIBLE_DEVICES": "0,GPU-00AA,2"}, visibleDevices{SourceAMDVisibleDevices: {"GPU-00aa"}}, nil},
		{"HIP's index among ROCR's UUIDs", map[string]string{"ROCR_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c", "HIP_VISIBLE_DEVICES": "2,0,7"}, visibleDevices{SourceAMDVisibleDevices: {"GPU-c", "GPU-a"}}, nil},
		{"HIP's index beside ROCR's indices", map[string]string{"ROCR_VISIBLE_DEVICES": "1,GPU-b", "HIP_VISIBLE_DEVICES": "1"}, nil, nil},
		{"HIP's index alone", map[string]string{"HIP_VISIBLE_DEVICES": "0"}, nil, nil},
		{"HIP's UUID alone", map[string]string{"HIP_VISIBLE_DEVICES": "GPU-B"}, visibleDevices{SourceAMDVisibleDevices: {"GPU-b"}}, nil},
		{"HIP's UUID that ROCR hides", map[string]string{"ROCR_VISIBLE_DEVICES": "GPU-a", "HIP_VISIBLE_DEVICES": "GPU-b"}, nil, nil},
		{"both vendors' variables", map[string]string{"NVIDIA_VISIBLE_DEVICES": "3,bad", "ROCR_VISIBLE_DEVICES": "GPU-a,,-1"}, visibleDevices{SourceNvidiaVisibleDevices: {"3"}, SourceAMDVisibleDevices: {"GPU-a"}}, map[Source]int{SourceNvidiaVisibleDevices: 1, SourceAMDVisibleDevices: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, malformed := readVisibleDevices(tt.env)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.malformed, malformed)
		})
	}
}

// TestDeviceIndexPCI: a PCI address joins its GPU in either writer's form, the kernel's
// (0000:c1:00.0, ROCm's device plugin) or NVML's (00000000:C1:00.0, gpu_info on NVIDIA).
func TestDeviceIndexPCI(t *testing.T) {
	ix := deviceIndex{}
	ix.fill([]gpuReading{
		{minor: "0", uuid: "GPU-a", pciBusID: "00000000:C1:00.0"},
		{minor: "1", uuid: "GPU-b", pciBusID: "0000:e1:00.0"},
		{minor: "2", uuid: "GPU-c", pciBusID: "0000:e1:00.0", partitionDevice: "amdgpu_xcp_7"},
	})
	for id, want := range map[string]int{"0000:c1:00.0": 0, "00000000:C1:00.0": 0, "0000:E1:00.0": 1, "0000:e1:00.0::1": 1, "amdgpu_xcp_7": 2} {
		got, ok := ix.resolve(id)
		if assert.True(t, ok, id) {
			assert.Equal(t, target{gpu: want, mig: -1}, got, id)
		}
	}
	for _, id := range []string{"0000:c2:00.0", "amdgpu_xcp_8", "c1:00.0"} {
		_, ok := ix.resolve(id)
		assert.False(t, ok, id)
	}
}

func TestPCIAddress(t *testing.T) {
	for in, want := range map[string]string{
		"0000:c1:00.0": "0000:c1:00.0", "00000000:C1:00.0": "0000:c1:00.0", "1:2:3.4": "0001:02:03.4", "10000:00:1f.7": "10000:00:1f.7",
	} {
		got, ok := pciAddress(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "c1:00.0", "0000:c1:00", "0000:c1:20.0", "0000:c1:00.8", "0000:100:00.0", "000000000:c1:00.0", "0000:-1:00.0", "0000:c1:00.0.1", "GPU-abc", "amdgpu_xcp_3"} {
		_, ok := pciAddress(in)
		assert.False(t, ok, in)
	}
}

func FuzzPCIAddress(f *testing.F) {
	for _, s := range []string{"0000:c1:00.0", "00000000:C1:00.0", "1:2:3.4", "0000:c1:20.0", "::.", "amdgpu_xcp_3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, ok := pciAddress(s)
		if !ok {
			return
		}
		again, ok := pciAddress(addr)
		if !ok || again != addr {
			t.Fatalf("%q -> %q -> %q, %v: not the kernel's form", s, addr, again, ok)
		}
	})
}
