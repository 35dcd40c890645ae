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
	if !src.ready.Load() {
		t.Skip("NVML is not available on this machine (no NVIDIA driver): nothing to compare")
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skip("nvidia-smi is not on PATH: nothing to compare with")
	}
	fields := []string{"index", "uuid", "name", "memory.total", "temperature.gpu", "power.draw", "pcie.link.gen.max", "pcie.link.width.max", "pcie.link.width.current", "memory.reserved", "temperature.memory"}
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
	}
}
