// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Only `make test-gpu` builds this file (tag gpu): on the machines `make test` runs on there
// is no GPU, and a skipped comparison must not pass for a test that ran.

//go:build gpu

package gpureceiver

import (
	"encoding/csv"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgainstNvidiaSMI compares one collection on this machine's real GPUs with nvidia-smi. It
// is what `make test-gpu` runs; without NVML or nvidia-smi it skips, saying so.
func TestAgainstNvidiaSMI(t *testing.T) {
	cfg := testConfig()
	lib, release, err := openLibrary(cfg)
	require.NoError(t, err)
	clock := newFakeClock()
	src := startScraper(t, cfg, lib, clock, nil)
	defer release()
	if !src.lib.ready.Load() {
		t.Skip("NVML is not available on this machine (no NVIDIA driver): nothing to compare")
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skip("nvidia-smi is not on PATH: nothing to compare with")
	}
	fields := []string{
		"index", "uuid", "name", "memory.total", "temperature.gpu", "power.draw", "pcie.link.gen.max", "pcie.link.width.max", "pcie.link.width.current", "memory.reserved", "temperature.memory",
		"clocks.max.sm", "clocks.max.memory", "power.min_limit", "power.max_limit",
	}
	out, err := exec.Command(smi, "--query-gpu="+strings.Join(fields, ","), "--format=csv,noheader,nounits").Output()
	require.NoError(t, err)
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	require.NoError(t, err)
	clock.Advance(time.Second)
	md := src.scrape()
	require.Len(t, rows, md.ResourceMetrics().Len()-1, "one resource per GPU nvidia-smi lists, plus the node")

	num := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		require.NoError(t, err, s)
		return v
	}
	for _, row := range rows {
		for i := range row {
			row[i] = strings.TrimSpace(row[i])
		}
		t.Logf("nvidia-smi: %s", strings.Join(row, ", "))
		rm := gpuResource(t, md, row[0])
		uuid, _ := rm.Resource().Attributes().Get("uuid")
		assert.Equal(t, row[1], uuid.Str(), "uuid of GPU %s", row[0])
		info := points(rm, "gpu_info")
		require.Len(t, info, 1)
		model, _ := info[0].Attributes().Get("model")
		assert.Equal(t, row[2], model.Str())
		// nvidia-smi leaves out memory reserved by the driver on some versions.
		totalMiB := float64(value(t, rm, "gpu_memory_total_bytes")) / (1 << 20)
		assert.InEpsilon(t, num(row[3]), totalMiB, 0.03, "memory.total MiB of GPU %s", row[0])
		temp := points(rm, "nvidiasmi_temperature")
		require.Len(t, temp, 1)
		assert.InDelta(t, num(row[4]), temp[0].DoubleValue(), 3, "temperature of GPU %s", row[0])
		if row[5] != "[N/A]" {
			power := points(rm, "gpu_power_watts")
			require.Len(t, power, 1)
			assert.InDelta(t, num(row[5]), power[0].DoubleValue(), max(20, num(row[5])*0.2), "power of GPU %s", row[0])
		}
		assert.Equal(t, int64(num(row[6])), value(t, rm, "gpu_pcie_link_gen_max"))
		assert.Equal(t, int64(num(row[7])), value(t, rm, "gpu_pcie_link_width_max"))
		assert.Equal(t, int64(num(row[8])), value(t, rm, "gpu_pcie_link_width_current"))
		reservedMiB := float64(value(t, rm, "gpu_memory_reserved_bytes")) / (1 << 20)
		assert.InDelta(t, num(row[9]), reservedMiB, 1, "memory.reserved MiB of GPU %s", row[0])
		// A GPU without an HBM sensor: nvidia-smi says N/A, the receiver leaves the series out.
		if hbm := points(rm, "gpu_memory_temperature_celsius"); strings.Contains(row[10], "N/A") {
			assert.Empty(t, hbm, "temperature.memory of GPU %s is N/A", row[0])
		} else if assert.Len(t, hbm, 1, "temperature.memory of GPU %s", row[0]) {
			assert.InDelta(t, num(row[10]), hbm[0].DoubleValue(), 3, "temperature.memory of GPU %s", row[0])
		}
		assert.Equal(t, int64(1), value(t, rm, "gpu_up"))
		assert.Equal(t, int64(num(row[11])), value(t, rm, "gpu_clock_max_mhz", "clock", "sm"), "clocks.max.sm of GPU %s", row[0])
		assert.Equal(t, int64(num(row[12])), value(t, rm, "gpu_clock_max_mhz", "clock", "memory"), "clocks.max.memory of GPU %s", row[0])
		if !strings.Contains(row[13], "N/A") {
			assert.InDelta(t, num(row[13]), gauge(t, rm, "gpu_power_limit_min_watts"), 1, "power.min_limit of GPU %s", row[0])
			assert.InDelta(t, num(row[14]), gauge(t, rm, "gpu_power_limit_max_watts"), 1, "power.max_limit of GPU %s", row[0])
		}
	}
}

// gpmWindow is how long the reference tool samples, and the interval between the receiver's
// two collections around it.
const gpmWindow = 10 * time.Second

// gpmReference are the GPM metrics compared, as the receiver names them and as each reference
// tool asks for them: nvidia-smi dmon's --gpm-metrics ids are NVML's (1 graphics, 2 SM, 3 SM
// occupancy, 5 any tensor, 10 DRAM bandwidth), dcgmi dmon's DCGM's profiling fields (1001
// GR_ENGINE_ACTIVE, 1002 SM_ACTIVE, 1003 SM_OCCUPANCY, 1004 PIPE_TENSOR_ACTIVE, 1005
// DRAM_ACTIVE), which are ratios.
var gpmReference = []struct {
	metric, pipe string
	smi, dcgm    string
}{
	{"gpu_graphics_engine_active_percent", "", "1", "1001"},
	{"gpu_sm_active_percent", "", "2", "1002"},
	{"gpu_sm_occupancy_percent", "", "3", "1003"},
	{"gpu_pipe_active_percent", "tensor", "5", "1004"},
	{"gpu_dram_active_percent", "", "10", "1005"},
}

// TestGPMAgainstNvidiaSMI compares the receiver's GPM metrics over one interval with what
// nvidia-smi dmon --gpm-metrics (or, without it, dcgmi dmon) samples every second over the same
// interval, on each GPU that has GPM: the means agree within 10 percentage points (the tools'
// windows start and end a moment apart from the collections'). test/gpu/run.sh runs it idle and
// under load. It skips without NVML, without a GPU with GPM, or without either tool.
func TestGPMAgainstNvidiaSMI(t *testing.T) {
	cfg := testConfig()
	lib, release, err := openLibrary(cfg)
	require.NoError(t, err)
	clock := newFakeClock()
	src := startScraper(t, cfg, lib, clock, nil)
	defer release()
	if !src.lib.ready.Load() {
		t.Skip("NVML is not available on this machine (no NVIDIA driver): nothing to compare")
	}
	src.scrape() // the first samples
	var gpm []string
	for _, g := range src.gpus {
		if g.gpm.supported {
			gpm = append(gpm, strconv.Itoa(g.id.index))
		}
	}
	if len(gpm) == 0 {
		t.Skip("no GPU here has GPM (Hopper and newer): nothing to compare")
	}
	ids, scale := make([]string, len(gpmReference)), 1.0
	var cmd *exec.Cmd
	seconds := strconv.Itoa(int(gpmWindow / time.Second))
	if smi, lookErr := exec.LookPath("nvidia-smi"); lookErr == nil {
		for i, r := range gpmReference {
			ids[i] = r.smi
		}
		cmd = exec.Command(smi, "dmon", "--gpm-metrics", strings.Join(ids, ","), "-d", "1", "-c", seconds)
	} else if dcgmi, lookErr := exec.LookPath("dcgmi"); lookErr == nil {
		for i, r := range gpmReference {
			ids[i] = r.dcgm
		}
		cmd, scale = exec.Command(dcgmi, "dmon", "-e", strings.Join(ids, ","), "-d", "1000", "-c", seconds), 100
	} else {
		t.Skip("neither nvidia-smi nor dcgmi is on PATH: nothing to compare with")
	}
	out, err := cmd.Output()
	require.NoError(t, err, "%s", cmd)
	clock.Advance(gpmWindow)
	md := src.scrape()
	t.Logf("%s:\n%s", cmd, out)
	samples := parseDmon(string(out), len(gpmReference))
	for _, gpu := range gpm {
		index, _ := strconv.Atoi(gpu)
		rm := gpuResource(t, md, gpu)
		for i, r := range gpmReference {
			var want []float64
			if samples[index] != nil {
				want = samples[index][i]
			}
			attrs := []string{}
			if r.pipe != "" {
				attrs = append(attrs, "pipe", r.pipe)
			}
			if len(want) == 0 {
				t.Logf("GPU %s: the tool gave no %s", gpu, r.metric)
				continue
			}
			var sum float64
			for _, v := range want {
				sum += v * scale
			}
			mean := sum / float64(len(want))
			got := gauge(t, rm, r.metric, attrs...)
			t.Logf("GPU %s %s: receiver %.2f, reference mean %.2f of %d samples", gpu, r.metric, got, mean, len(want))
			assert.InDelta(t, mean, got, 10, "GPU %s %s", gpu, r.metric)
		}
	}
}
