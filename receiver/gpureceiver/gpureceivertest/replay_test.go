// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceivertest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// replays are internal/gpuscenario's scenarios that start from a real capture.
var replays = filepath.Join("..", "..", "..", "internal", "gpuscenario", "testdata")

// point is a data point of a batch: its metric, GPU (minor_number) and attributes.
type point struct {
	metric, minor string
	attrs         pcommon.Map
	value         float64
}

func points(md pmetric.Metrics) []point {
	var out []point
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		minor, _ := rm.Resource().Attributes().Get("minor_number")
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				for l := 0; l < m.Gauge().DataPoints().Len(); l++ {
					dp := m.Gauge().DataPoints().At(l)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					out = append(out, point{metric: m.Name(), minor: minor.Str(), attrs: dp.Attributes(), value: v})
				}
			}
		}
	}
	return out
}

// find is the value of metric on GPU minor whose attributes include want; ok false if none.
func find(ps []point, metric string, minor int, want map[string]string) (float64, bool) {
	for _, p := range ps {
		if p.metric != metric || p.minor != strconv.Itoa(minor) {
			continue
		}
		match := true
		for k, v := range want {
			got, ok := p.attrs.Get(k)
			match = match && ok && got.Str() == v
		}
		if match {
			return p.value, true
		}
	}
	return 0, false
}

// TestReplayNvidiaCaptures runs the gpu receiver's simulated backend on each scenario that
// replays an nvidia-smi -q -x capture: every GPU of the capture is there, with the capture's
// UUID, model, PCI bus id, memory, highest clocks and power limits (and the scenario's MIG
// instances: the A100's four).
func TestReplayNvidiaCaptures(t *testing.T) {
	for _, name := range []string{"replay-k80.yaml", "replay-gtx1070.yaml", "replay-rtx2080ti.yaml", "replay-a100.yaml"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(replays, name)
			sc, err := gpuscenario.Load(path)
			require.NoError(t, err)
			require.NotEmpty(t, sc.Captured)
			batch, err := SimulatedBatch(path)
			require.NoError(t, err)
			ps := points(batch)
			gpus := GPUs(batch)
			require.Len(t, gpus, len(sc.Captured))
			for i, c := range sc.Captured {
				assert.Equal(t, c.UUID, gpus[i].UUID, "GPU %d", i)
				assert.Equal(t, sc.MIGUUIDs(i), gpus[i].MIG, "GPU %d's MIG instances", i)
				busID := fmt.Sprintf("%08X:%02X:%02X.0", c.PCI.Domain, c.PCI.Bus, c.PCI.Device)
				_, ok := find(ps, "gpu_info", i, map[string]string{"model": c.Model, "pci_bus_id": busID})
				assert.True(t, ok, "GPU %d: gpu_info{model=%q, pci_bus_id=%q}", i, c.Model, busID)
				for _, want := range []struct {
					metric string
					attrs  map[string]string
					value  float64
				}{
					{"gpu_memory_total_bytes", nil, float64(c.MemoryMiB << 20)},
					{"gpu_clock_max_mhz", map[string]string{"clock": "sm"}, float64(c.MaxSMClockMHz)},
					{"gpu_clock_max_mhz", map[string]string{"clock": "memory"}, float64(c.MaxMemClockMHz)},
					{"gpu_power_limit_min_watts", nil, float64(c.PowerMinW)},
					{"gpu_power_limit_max_watts", nil, float64(c.PowerMaxW)},
				} {
					got, ok := find(ps, want.metric, i, want.attrs)
					if assert.True(t, ok, "GPU %d: %s%v", i, want.metric, want.attrs) {
						assert.InDelta(t, want.value, got, 0, "GPU %d: %s%v", i, want.metric, want.attrs)
					}
				}
			}
		})
	}
}

// TestReplayKFDCaptures writes the AMD GPUs' files of each scenario that replays a KFD
// topology capture and runs the gpu receiver's amdgpu backend on them: every GPU (and compute
// partition) of the capture is there, with the UUID its unique_id gives and its PCI address.
func TestReplayKFDCaptures(t *testing.T) {
	for name, partitions := range map[string]int{"replay-mi308x.yaml": 4, "replay-mi210.yaml": 1} {
		t.Run(name, func(t *testing.T) {
			sc, err := gpuscenario.Load(filepath.Join(replays, name))
			require.NoError(t, err)
			player, err := amdgpufixture.NewPlayer(sc)
			require.NoError(t, err)
			root := t.TempDir()
			require.NoError(t, amdgpufixture.Write(root, player.Node(0)))
			batch, err := AMDBatch(root)
			require.NoError(t, err)
			ps := points(batch)
			gpus := GPUs(batch)
			require.Len(t, gpus, len(sc.Captured)*partitions)
			for i, c := range sc.Captured {
				minor := i * partitions // partitions are numbered GPU by GPU
				uuid := fmt.Sprintf("GPU-%016x", c.UniqueID)
				if partitions > 1 {
					uuid += "-0"
				}
				assert.Equal(t, uuid, gpus[minor].UUID, "GPU %d", i)
				_, ok := find(ps, "gpu_info", minor, map[string]string{"pci_bus_id": c.PCI.String()})
				assert.True(t, ok, "GPU %d: gpu_info{pci_bus_id=%q}", i, c.PCI)
			}
		})
	}
}
