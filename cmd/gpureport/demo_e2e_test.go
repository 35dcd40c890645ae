// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"
)

// TestDemoReport is `make report` without PROM_URL: a generated week in a private Prometheus.
// The demo's faults must come out as the demo planned them.
func TestDemoReport(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, []string{"-demo", "-out", out}, io.Discard, time.Now()))
	for _, f := range []string{
		report.FileHTML, report.FileJSON, report.FileJobs, report.FileUsers,
		report.FileVirtualClusters, report.FileGPUs, report.FileXIDs, report.FileFleet,
	} {
		assert.FileExists(t, filepath.Join(out, f))
	}
	js, err := os.ReadFile(filepath.Join(out, report.FileJSON))
	require.NoError(t, err)
	var r report.Report
	require.NoError(t, json.Unmarshal(js, &r))
	assert.Equal(t, 7*24*time.Hour, r.End.Sub(r.Start))
	assert.True(t, r.Simulated, "the demo's series are marked simulated")
	assertDemoFleet(t, r.Fleet)
	require.Len(t, r.GPUs, 24, "20 on the Kubernetes nodes, 4 on the Slurm node")
	assert.Len(t, r.Users, 6)
	assert.Len(t, r.VirtualClusters, 3, "the Slurm node's jobs are in none")
	assert.NotEmpty(t, r.Jobs)
	// The Slurm node's jobs: by id (their names repeat) and by account, from slurm_job_info.
	accounts := map[string]string{}
	for _, a := range r.SlurmAccounts {
		accounts[a.Name] = a.Username
	}
	assert.Equal(t, []string{"chemistry", "physics", "vision"}, slices.Sorted(maps.Keys(accounts)))
	assert.NotContains(t, accounts, "unknown", "every Slurm job has its slurm_job_info")
	slurmJobs := 0
	for _, j := range r.Jobs {
		if strings.HasSuffix(j.Name, ")") {
			slurmJobs++
			assert.Regexp(t, `^[a-z0-9-]+ \(5[0-9]{3}\)$`, j.Name)
		}
	}
	assert.Positive(t, slurmJobs)
	// The Hopper node's jobs have GPM's SM and tensor activity; resnet50's small kernels keep
	// its GPUs busy with few SMs working: busy but inefficient.
	var measured, flagged int
	for _, j := range r.Jobs {
		if !math.IsNaN(float64(j.SMActive)) {
			measured++
		}
		if j.BusyInefficient {
			flagged++
			assert.Contains(t, j.Name, "resnet50", "only the demo's inefficient kind is flagged")
			assert.Less(t, float64(j.SMActive), r.Options.LowSMBelow)
		}
	}
	assert.Positive(t, measured, "jobs on the Hopper node have SM activity")
	assert.Less(t, measured, len(r.Jobs), "the other nodes' have none")
	assert.Positive(t, flagged, "a busy but inefficient job")
	for _, g := range r.GPUs {
		switch {
		case g.Node == "gpu-node-03" && g.MinorNumber == "3":
			assert.Equal(t, 3.0, g.UnavailableHours, "off the bus for 3 h")
			assert.Equal(t, 165.0, g.AvailableHours)
			require.Len(t, g.XIDs, 1)
			assert.Equal(t, report.XIDCount{
				Code: "79", Count: 1, Resolution: "reboot", Severity: "fatal", Meaning: "GPU has fallen off the bus",
				Action: "drain the node, reboot it, and inspect the hardware if the XID comes back",
			}, g.XIDs[0])
			assert.True(t, g.RemapPending)
		case g.Node == "gpu-node-04":
			assert.Equal(t, 2.0, g.UnknownHours, "agent down for 2 h")
			assert.Equal(t, 166.0, g.AvailableHours)
		default:
			assert.Equal(t, 168.0, g.AvailableHours+g.UnavailableHours, g.UUID)
		}
	}
}
