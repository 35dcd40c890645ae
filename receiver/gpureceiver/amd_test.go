// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

var amdCompareOptions = []pmetrictest.CompareMetricsOption{
	pmetrictest.IgnoreStartTimestamp(),
	pmetrictest.IgnoreTimestamp(),
	pmetrictest.IgnoreResourceMetricsOrder(),
	pmetrictest.IgnoreMetricsOrder(),
	pmetrictest.IgnoreMetricDataPointsOrder(),
	pmetrictest.IgnoreMetricValues("cmd_rocm_smi_latency_seconds"),
}

// amdScraper is an amdgpu backend and the scraper over it, as the receiver runs them.
type amdScraper struct {
	*gpuScraper
	*amdBackend
}

func newAMDScraper(ss scraperSettings) amdScraper {
	b := newAMDBackend(ss)
	return amdScraper{newScraper(ss, b), b}
}

// amdNode writes n under a new root and returns a scraper of the amdgpu backend on it.
func amdNode(t *testing.T, n amdgpufixture.Node) (amdScraper, string, *clock.Fake) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, n))
	cfg := testConfig()
	cfg.Backend = BackendAMDGPU
	cfg.RootPath = root
	clk := newFakeClock()
	return newAMDScraper(settingsFor(cfg, clk)), root, clk
}

// TestAMDGolden is the whole output for an MI300X node (its second collection, after GPU 2
// was power-capped, GPU 5 counted an uncorrected memory error and GPU 6's link trained at x8),
// an MI300X node in CPX mode (two GPUs, 16 partitions) and an MI250X node (8 GCDs).
func TestAMDGolden(t *testing.T) {
	t.Run("mi300x", func(t *testing.T) {
		n := amdgpufixture.MI300X()
		s, root, clk := amdNode(t, n)
		s.scrape()
		n.GPUs[2].Metrics.Values["ppt_residency_acc"] = 40
		n.GPUs[2].Metrics.Values["accumulation_counter"] = 2000
		n.GPUs[5].RAS["umc"] = amdgpu.ErrcountRAS{Uncorrected: 1, Corrected: 12}
		n.GPUs[6].LinkWidth = 8
		require.NoError(t, amdgpufixture.Write(root, n))
		clk.Advance(10 * time.Second)
		goldentest.Metrics(t, filepath.Join("testdata", "expected", "amd-mi300x.yaml"), s.scrape(), amdCompareOptions...)
	})
	t.Run("mi300x-cpx", func(t *testing.T) {
		s, _, _ := amdNode(t, amdgpufixture.MI300XCPX(2))
		goldentest.Metrics(t, filepath.Join("testdata", "expected", "amd-mi300x-cpx.yaml"), s.scrape(), amdCompareOptions...)
	})
	t.Run("mi250x", func(t *testing.T) {
		s, _, _ := amdNode(t, amdgpufixture.MI250X())
		goldentest.Metrics(t, filepath.Join("testdata", "expected", "amd-mi250x.yaml"), s.scrape(), amdCompareOptions...)
	})
}

// readErrors is collector_read_errors_total{source} of a collection, 0 when absent.
func readErrors(t *testing.T, md pmetric.Metrics, source string) int64 {
	t.Helper()
	for _, dp := range points(nodeResource(t, md), "collector_read_errors_total") {
		if hasAttrs(dp.Attributes(), "source", source) {
			return dp.IntValue()
		}
	}
	return 0
}

func nodeResource(t *testing.T, md pmetric.Metrics) pmetric.ResourceMetrics {
	t.Helper()
	for i := range md.ResourceMetrics().Len() {
		rm := md.ResourceMetrics().At(i)
		if _, ok := rm.Resource().Attributes().Get("minor_number"); !ok {
			return rm
		}
	}
	require.FailNow(t, "no node resource")
	return pmetric.ResourceMetrics{}
}

func TestAMDMissingFileLeavesOnlyItsMetricOut(t *testing.T) {
	n := amdgpufixture.MI250X()
	n.GPUs[0].Missing = []string{"gpu_busy_percent", "gpu_metrics", n.HwmonDir(0) + "/temp1_input"}
	s, _, _ := amdNode(t, n)
	md := s.scrape()
	gpu0, gpu1 := gpuResource(t, md, "0"), gpuResource(t, md, "1")
	assert.Empty(t, points(gpu0, "gpu_utilization"), "no gpu_busy_percent and no gpu_metrics: no utilization, not 0")
	assert.Empty(t, points(gpu0, "rocmsmi_temperature"), "no edge reading in hwmon nor gpu_metrics")
	assert.Empty(t, points(gpu0, "gpu_energy_joules_total"), "energy comes from gpu_metrics only")
	assert.InDelta(t, 40.0, gauge(t, gpu0, "gpu_junction_temperature_celsius"), 0.001, "the other sensors are kept")
	assert.Len(t, points(gpu0, "gpu_memory_used_bytes"), 1)
	assert.Equal(t, int64(1), value(t, gpu0, "gpu_up"))
	assert.Len(t, points(gpu1, "gpu_utilization"), 1, "the other GPUs are whole")
	assert.Zero(t, readErrors(t, md, "sysfs")+readErrors(t, md, "gpu_metrics")+readErrors(t, md, "hwmon"), "a missing file is no error")
	assert.Empty(t, points(gpuResource(t, md, "1"), "gpu_power_watts"), "the second GCD of an MI250X reports no power: absent, not 0")
}

func TestAMDMalformedFilesAreCounted(t *testing.T) {
	n := amdgpufixture.MI300X()
	n.GPUs[1].Corrupt = map[string]string{
		"pp_dpm_sclk":                  "0: fast\n",
		"ras/umc_err_count":            "ue: many\nce: 0\n",
		"current_link_speed":           "12.5 GT/s PCIe\n",
		n.HwmonDir(1) + "/temp2_input": "hot\n",
		"mem_info_vram_used":           "-1\n",
	}
	s, _, _ := amdNode(t, n)
	md := s.scrape()
	gpu1 := gpuResource(t, md, "1")
	assert.Equal(t, int64(1), readErrors(t, md, "pp_dpm"))
	assert.Equal(t, int64(1), readErrors(t, md, "ras"))
	assert.Equal(t, int64(1), readErrors(t, md, "pcie_link"))
	assert.Equal(t, int64(1), readErrors(t, md, "hwmon"))
	assert.Equal(t, int64(1), readErrors(t, md, "sysfs"))
	for _, dp := range points(gpu1, "gpu_clock_mhz") {
		if hasAttrs(dp.Attributes(), "clock", "sm") {
			assert.Equal(t, int64(1420), dp.IntValue(), "the SM clock falls back to hwmon's freq1_input")
		}
	}
	assert.Empty(t, points(gpu1, "gpu_clock_max_mhz")[1:], "only the memory clock's maximum is left")
	assert.Len(t, points(gpu1, "gpu_ras_errors"), 12, "the umc block is left out, the six others kept")
	assert.Empty(t, points(gpu1, "gpu_pcie_link_gen_current"))
	assert.Empty(t, points(gpu1, "gpu_memory_used_bytes"))
	assert.InDelta(t, 48.0, gauge(t, gpu1, "gpu_junction_temperature_celsius"), 0.001, "gpu_metrics' hotspot stands in for the malformed hwmon file")
	assert.Equal(t, int64(1), value(t, gpu1, "gpu_up"))

	// Counts are cumulative.
	assert.Equal(t, int64(2), readErrors(t, s.scrape(), "pp_dpm"))
}

// TestAMDMalformedKFDNode: a GPU whose KFD node cannot be read is still reported, with the
// uuid of its card's unique_id and without processes (no gpu_id to join them by).
func TestAMDMalformedKFDNode(t *testing.T) {
	n := amdgpufixture.MI300X()
	s, root, _ := amdNode(t, n)
	// KFD nodes 0 and 1 are the CPUs; node 2 is GPU 0.
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys", "class", "kfd", "kfd", "topology", "nodes", "2", "properties"), []byte("location_id many\n"), 0o600))
	md := s.scrape()
	assert.Equal(t, int64(1), readErrors(t, md, "kfd"))
	gpu0 := gpuResource(t, md, "0")
	uuid, _ := gpu0.Resource().Attributes().Get("uuid")
	assert.Equal(t, "GPU-4b7a3c1e9d2f0500", uuid.Str())
	assert.Empty(t, points(gpu0, "gpu_process_memory_used_bytes"))
	assert.Len(t, points(gpu0, "gpu_utilization"), 1)
	assert.Len(t, points(gpuResource(t, md, "1"), "gpu_process_memory_used_bytes"), 2)
}

func TestAMDUnknownGPUMetricsRevisionIsSkipped(t *testing.T) {
	n := amdgpufixture.MI300X()
	blob, err := amdgpu.EncodeGPUMetrics(amdgpu.Revision{Format: 1, Content: 6}, nil)
	require.NoError(t, err)
	blob[3] = 99 // v1_99
	n.GPUs[3].Metrics = &amdgpufixture.GPUMetrics{Raw: blob}
	n.GPUs[4].Metrics = &amdgpufixture.GPUMetrics{Raw: []byte{1, 2}} // truncated
	s, _, _ := amdNode(t, n)
	md := s.scrape()
	assert.Equal(t, int64(2), readErrors(t, md, "gpu_metrics"))
	for _, minor := range []string{"3", "4"} {
		gpu := gpuResource(t, md, minor)
		assert.Empty(t, points(gpu, "gpu_energy_joules_total"))
		assert.Len(t, points(gpu, "gpu_utilization"), 1, "gpu_busy_percent is read all the same")
		assert.Equal(t, int64(1), value(t, gpu, "gpu_up"))
	}
	assert.Len(t, points(gpuResource(t, md, "5"), "gpu_energy_joules_total"), 1)
}

func TestAMDGPUVanishes(t *testing.T) {
	n := amdgpufixture.MI300X()
	s, root, clk := amdNode(t, n)
	md := s.scrape()
	uuid, _ := gpuResource(t, md, "2").Resource().Attributes().Get("uuid")
	require.NoError(t, os.RemoveAll(filepath.Join(root, n.Card(2))))
	clk.Advance(10 * time.Second)
	md = s.scrape()
	gone := gpuResource(t, md, "2")
	assert.Equal(t, int64(0), value(t, gone, "gpu_up"), "a GPU that vanished is down")
	got, _ := gone.Resource().Attributes().Get("uuid")
	assert.Equal(t, uuid.Str(), got.Str(), "and keeps its labels")
	assert.Empty(t, points(gone, "gpu_utilization"), "its readings end")
	assert.Equal(t, int64(7), value(t, nodeResource(t, md), "gpu_devices_detected"))
	assert.Equal(t, int64(1), value(t, gpuResource(t, md, "3"), "gpu_up"), "the others keep their minor numbers and report")
	assert.Len(t, points(gpuResource(t, md, "3"), "gpu_utilization"), 1)
}

// TestAMDHungReadTakesOnlyItsGPUDown makes one GPU's read block, as a read of a wedged
// driver's attribute does.
func TestAMDHungReadTakesOnlyItsGPUDown(t *testing.T) {
	n := amdgpufixture.MI300X()
	s, _, clk := amdNode(t, n)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	s.readGPU = func(dir string) amdgpu.Snapshot {
		// dir is the card's device link, to the GPU's PCI device directory.
		if target, _ := os.Readlink(dir); filepath.Base(target) == n.GPUs[4].PCIAddress {
			entered <- struct{}{}
			<-release
		}
		return amdgpu.ReadGPU(dir)
	}

	done := make(chan pmetric.Metrics)
	go func() { done <- s.scrape() }()
	<-entered
	nextWait(t, clk, s.cfg.CallTimeout)
	md := <-done
	assert.Equal(t, int64(0), value(t, gpuResource(t, md, "4"), "gpu_up"))
	assert.Equal(t, int64(1), readErrors(t, md, "deadline"))
	assert.Equal(t, int64(1), value(t, gpuResource(t, md, "5"), "gpu_up"), "the other GPUs keep reporting")

	// Until the read returns the GPU is skipped without a new read; then it reports again.
	md = s.scrape()
	assert.Equal(t, int64(0), value(t, gpuResource(t, md, "4"), "gpu_up"))
	assert.Empty(t, entered, "no second read of the hung GPU")
	close(release)
	poll.Until(t, 10*time.Second, "the hung read to return", func() bool { return !s.gpus[n.GPUs[4].PCIAddress].lane.Hung() })
	md = s.scrape()
	assert.Equal(t, int64(1), value(t, gpuResource(t, md, "4"), "gpu_up"))
}

func TestAMDProcessesAndPartitions(t *testing.T) {
	s, _, _ := amdNode(t, amdgpufixture.MI300XCPX(2))
	md := s.scrape()
	assert.Equal(t, int64(16), value(t, nodeResource(t, md), "gpu_devices_detected"))
	p0, p3, p8 := gpuResource(t, md, "0"), gpuResource(t, md, "3"), gpuResource(t, md, "8")
	assert.Equal(t, int64(10<<30), value(t, p0, "gpu_process_memory_used_bytes", "pid", "4242"))
	assert.Equal(t, int64(12<<30), value(t, p3, "gpu_process_memory_used_bytes", "pid", "4343"))
	assert.Equal(t, int64(1), value(t, p0, "gpu_info", "partition_device", "0000:05:00.0"))
	assert.Equal(t, int64(1), value(t, p3, "gpu_info", "partition_device", "amdgpu_xcp_2"))
	assert.Equal(t, int64(1), value(t, p8, "gpu_info", "partition_device", "0000:15:00.0", "pci_bus_id", "0000:15:00.0"))
	uuid, _ := p3.Resource().Attributes().Get("uuid")
	assert.Equal(t, "GPU-4b7a3c1e9d2f0500-3", uuid.Str())
	assert.Empty(t, points(p0, "gpu_utilization"), "the driver's utilization is the whole GPU's: absent on partitions")
	assert.Len(t, points(p0, "gpu_junction_temperature_celsius"), 1, "the GPU's health readings are on its first partition")
	assert.Empty(t, points(p3, "gpu_junction_temperature_celsius"))
}

// TestAMDPartitionedGPUFaultsOnce: a CPX GPU's RAS counts, PCIe link and throttling belong to
// the physical GPU and are reported on its first partition only, so one uncorrectable error or
// one degraded link is one series (and one alert), not one per partition.
func TestAMDPartitionedGPUFaultsOnce(t *testing.T) {
	n := amdgpufixture.MI300XCPX(2)
	n.GPUs[0].RAS["umc"] = amdgpu.ErrcountRAS{Uncorrected: 1}
	n.GPUs[0].LinkWidth = 8
	s, _, clk := amdNode(t, n)
	s.scrape()
	clk.Advance(10 * time.Second) // throttling is what grew between two collections
	md := s.scrape()
	for minor := range 16 {
		gpu := gpuResource(t, md, strconv.Itoa(minor))
		for _, name := range []string{"gpu_ras_errors", "gpu_pcie_link_width_current", "gpu_pcie_link_gen_current", "gpu_health", "gpu_clock_event_reason"} {
			if minor%8 == 0 {
				assert.NotEmpty(t, points(gpu, name), "partition 0 of GPU %d has the GPU's %s", minor/8, name)
			} else {
				assert.Empty(t, points(gpu, name), "partition %d of GPU %d has no %s of its own", minor%8, minor/8, name)
			}
		}
	}
	p0 := gpuResource(t, md, "0")
	assert.Equal(t, int64(1), value(t, p0, "gpu_ras_errors", "block", "umc", "error_type", "uncorrected"))
	assert.Equal(t, int64(8), value(t, p0, "gpu_pcie_link_width_current"))
	assert.Equal(t, int64(healthWarning), value(t, p0, "gpu_health", "condition", "pcie_link"))
	assert.Equal(t, int64(0), value(t, gpuResource(t, md, "8"), "gpu_ras_errors", "block", "umc", "error_type", "uncorrected"), "the other GPU has none")
}

// TestAMDPartitionedNodes: partitioned nodes laid out as the kernel lays them out (each
// partition its own KFD node, its index ORed into location_id) report every partition as a
// device, with its processes' VRAM.
func TestAMDPartitionedNodes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		node    amdgpufixture.Node
		devices int
	}{
		{"8 MI308X in CPX", amdgpufixture.MI308XPartitioned(4), 32},
		{"8 MI300X in CPX", amdgpufixture.MI300XCPX(8), 64},
		{"8 MI300X in DPX", amdgpufixture.MI300XPartitioned(8, 2), 16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := amdNode(t, tt.node)
			md := s.scrape()
			assert.Equal(t, int64(tt.devices), value(t, nodeResource(t, md), "gpu_devices_detected"))
			assert.Zero(t, readErrors(t, md, "kfd"), "no KFD node left unjoined")
			perGPU := tt.devices / len(tt.node.GPUs)
			for _, p := range tt.node.Processes {
				minor := strconv.Itoa(p.GPU*perGPU + p.Partition)
				gpu := gpuResource(t, md, minor)
				assert.Equal(t, int64(p.VRAMBytes), value(t, gpu, "gpu_process_memory_used_bytes", "pid", strconv.Itoa(p.PID)), "process %d on device %s", p.PID, minor)
				uuid, _ := gpu.Resource().Attributes().Get("uuid")
				assert.Equal(t, fmt.Sprintf("GPU-%016x-%d", tt.node.GPUs[p.GPU].UniqueID, p.Partition), uuid.Str())
			}
		})
	}
}

// TestAMDUnjoinedKFDNodeIsCounted: a KFD node that belongs to no GPU the driver lists is
// counted in collector_read_errors_total{source="kfd"} at each collection and logged once.
func TestAMDUnjoinedKFDNodeIsCounted(t *testing.T) {
	n := amdgpufixture.MI300XCPX(2)
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, n))
	// Node 5 is partition 3 of GPU 0 (2 CPU nodes first): give it a location nothing has.
	path := filepath.Join(root, "sys", "class", "kfd", "kfd", "topology", "nodes", "5", "properties")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), "location_id 1283\n", "location_id 13059\n", 1)), 0o600))
	cfg := testConfig()
	cfg.Backend = BackendAMDGPU
	cfg.RootPath = root
	ss := settingsFor(cfg, newFakeClock())
	core, logs := observer.New(zap.WarnLevel)
	ss.set.Logger = zap.New(core)
	s := newAMDScraper(ss)

	md := s.scrape()
	assert.Equal(t, int64(1), readErrors(t, md, "kfd"))
	assert.Equal(t, int64(15), value(t, nodeResource(t, md), "gpu_devices_detected"))
	md = s.scrape()
	assert.Equal(t, int64(2), readErrors(t, md, "kfd"), "counted at each collection")
	unjoined := logs.FilterMessageSnippet("belongs to no AMD GPU").All()
	require.Len(t, unjoined, 1, "logged once")
	assert.Contains(t, fmt.Sprint(unjoined[0].ContextMap()["error"]), "location_id 13059")
}

// TestAMDRASInaccessibleIsNoReadError: while a GPU is in reset its RAS count files answer
// "Query currently inaccessible": the counts are absent for that collection, without a read
// error (read-error alerts would page on every reset), and come back after it.
func TestAMDRASInaccessibleIsNoReadError(t *testing.T) {
	n := amdgpufixture.MI300X()
	n.GPUs[0].RAS["umc"] = amdgpu.ErrcountRAS{Corrected: 3}
	n.GPUs[0].Corrupt = map[string]string{"ras/umc_err_count": "Query currently inaccessible\n", "ras/gfx_err_count": "Query currently inaccessible\n"}
	s, root, _ := amdNode(t, n)
	md := s.scrape()
	assert.Zero(t, readErrors(t, md, "ras"))
	gpu0 := gpuResource(t, md, "0")
	for _, dp := range points(gpu0, "gpu_ras_errors") {
		block, _ := dp.Attributes().Get("block")
		assert.NotContains(t, []string{"umc", "gfx"}, block.Str(), "an inaccessible count is absent")
	}
	assert.Equal(t, int64(0), value(t, gpu0, "gpu_ras_errors", "block", "sdma", "error_type", "uncorrected"), "the other blocks are read")
	for _, dp := range points(gpu0, "gpu_health") {
		cond, _ := dp.Attributes().Get("condition")
		assert.NotEqual(t, "memory_ecc", cond.Str(), "no memory verdict without the umc count")
	}

	n.GPUs[0].Corrupt = nil
	require.NoError(t, amdgpufixture.Write(root, n))
	md = s.scrape()
	assert.Zero(t, readErrors(t, md, "ras"))
	assert.Equal(t, int64(3), value(t, gpuResource(t, md, "0"), "gpu_ras_errors", "block", "umc", "error_type", "corrected"))
}

func TestAMDProcessWithZeroVRAMIsReported(t *testing.T) {
	s, _, _ := amdNode(t, amdgpufixture.MI300X())
	md := s.scrape()
	gpu1 := gpuResource(t, md, "1")
	assert.Equal(t, int64(0), value(t, gpu1, "gpu_process_memory_used_bytes", "pid", "5152"), "a process holding the GPU with 0 bytes")
	assert.Empty(t, points(gpu1, "gpu_process_sm_utilization"), "the KFD gives no per-process utilization")
	uuid, _ := gpu1.Resource().Attributes().Get("uuid")
	assert.Equal(t, "GPU-4b7a3c1e9d2f0501", uuid.Str())
	assert.Equal(t, int64(1), value(t, gpu1, "gpu_info", "pci_bus_id", "0000:15:00.0", "model", "AMD Instinct MI300X OAM", "driver_version", "6.10.5"))
	assert.Empty(t, points(gpu1, "rocmsmi_temperature"), "MI300X has no edge sensor")
}

func TestResolveBackend(t *testing.T) {
	amd := t.TempDir()
	require.NoError(t, amdgpufixture.Write(amd, amdgpufixture.MI250X()))
	both := t.TempDir()
	require.NoError(t, amdgpufixture.Write(both, amdgpufixture.MI250X()))
	require.NoError(t, os.MkdirAll(filepath.Join(both, "proc", "driver", "nvidia"), 0o755))
	noKFD := t.TempDir()
	require.NoError(t, amdgpufixture.Write(noKFD, amdgpufixture.MI250X()))
	require.NoError(t, os.Remove(filepath.Join(noKFD, "dev", "kfd")))
	for _, tt := range []struct {
		name    string
		root    string
		backend Backend
		want    Backend
	}{
		{"amd node", amd, BackendAuto, BackendAMDGPU},
		{"nvidia driver too", both, BackendAuto, BackendNVML},
		{"no kfd", noKFD, BackendAuto, BackendNVML},
		{"empty node", t.TempDir(), BackendAuto, BackendNVML},
		{"explicit", amd, BackendSimulated, BackendSimulated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Backend, cfg.RootPath = tt.backend, tt.root
			assert.Equal(t, tt.want, resolveBackend(cfg))
		})
	}
}
