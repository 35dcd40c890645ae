// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"
)

// assertDemoFleet: the demo week's health history (internal/demo/health.go) as the fleet-health
// rules record it, computed by hand in node-hours:
//
//   - gpu-node-01 (A100): three quarantines for its GPU 2's row remapping, escalated: reset_gpu
//     1 h, reboot 2 h, inspect_hardware 12 h, each followed by 0.5 h held by the validation gate:
//     3 faults, 15 h unhealthy and quarantined, 16.5 h out of service;
//   - gpu-node-03 (A100): its GPU 3's ECC error at 81 h (double_bit_ecc, row_remap_pending),
//     off the bus at 82 h (xid, gpu_lost), quarantined for reset_gpu 1 h, then reboot to the end
//     of the week: 4 faults, 87 h unhealthy, quarantined and out of service;
//   - gpu-node-02 healthy all week; gpu-node-04 healthy, its agent down 2 h (166 h known);
//     slurm-node-01 (A100, 4 GPUs) healthy all week;
//   - the A100 pool: 7 faults; 102 h unhealthy; known 4 × 168 + 166 = 838 h, 103.5 h out of
//     service: availability 734.5 / 838, 734.5 / 7 h between faults, 102 / 7 h to repair (mean),
//     87 h the longest; GPUs: 102 of 16 × 168 + 4 × 166 = 3352 GPU-hours unhealthy;
//   - the H100 pool (gpu-node-05): nothing.
//
// A stretch still open at the week's end is short by the rules' evaluation offset (promtool
// evaluates a group at Prometheus's offset within the minute): within a minute, or a minute a
// node for the availability, whose known time moves too.
func assertDemoFleet(t *testing.T, fleet []report.FleetHealth) {
	t.Helper()
	require.Len(t, fleet, 2)
	const minute = 1.0 / 60
	a100, h100 := fleet[0], fleet[1]
	assert.Equal(t, "NVIDIA A100-SXM4-80GB", a100.Pool)
	assert.Equal(t, 5, a100.Nodes, "four Kubernetes nodes and the Slurm node")
	assert.Equal(t, 20, a100.GPUs)
	assert.Equal(t, 7.0, a100.Faults)
	assert.InDelta(t, 102, a100.UnhealthyHours, minute)
	assert.InDelta(t, 102, a100.QuarantinedHours, minute)
	assert.InDelta(t, 2, a100.QuarantinedHoursByAction["reset_gpu"], 1e-9)
	assert.InDelta(t, 2+86, a100.QuarantinedHoursByAction["reboot"], minute)
	assert.InDelta(t, 12, a100.QuarantinedHoursByAction["inspect_hardware"], 1e-9)
	assert.InDelta(t, 1.5, a100.ValidationHours, 1e-9)
	assert.Equal(t, map[string]int{"reset_gpu": 1, "reboot": 2, "inspect_hardware": 1}, a100.Quarantines)
	assert.InDelta(t, 102.0/7, float64(a100.MeanTimeToRepairHours), minute)
	assert.InDelta(t, 87, a100.MaxTimeToRepairHours, minute)
	assert.InDelta(t, 734.5/7, float64(a100.MeanTimeBetweenFaultsHours), minute)
	assert.InDelta(t, 734.5/838, float64(a100.NodeAvailability), 5*minute/838, "a minute a node")
	assert.InDelta(t, 1-102.0/3352, float64(a100.GPUAvailability), minute/3352)

	assert.Equal(t, "NVIDIA H100 80GB HBM3", h100.Pool)
	assert.Equal(t, 1, h100.Nodes)
	assert.Equal(t, 4, h100.GPUs)
	assert.Zero(t, h100.Faults)
	assert.Zero(t, h100.MaxTimeToRepairHours)
	assert.Equal(t, 1.0, float64(h100.NodeAvailability))
	assert.Equal(t, 1.0, float64(h100.GPUAvailability))
	assert.Empty(t, h100.Quarantines)
}
