// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Only `make test-gpu` builds this file (tag gpu): on the machines `make test` runs on there
// is no GPU, and a skipped check must not pass for one that ran.

//go:build gpu

package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckThisNode checks this machine's real GPUs as a prolog would: the GPUs nvidia-smi lists
// (count, UUIDs, minor numbers) are the check's, and a lent GPU is healthy. Where this process
// cannot read the kernel log (a container), XIDs are left out and it says so.
func TestCheckThisNode(t *testing.T) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skip("nvidia-smi is not on PATH: no NVIDIA GPU to check")
	}
	out, err := exec.Command(smi, "--query-gpu=index,uuid", "--format=csv,noheader").Output()
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(out)), "\n")
	args := []string{"-backend", "nvml", "-gpus", strconv.Itoa(len(rows))}
	if f, err := os.Open("/dev/kmsg"); err != nil {
		t.Logf("the kernel log cannot be read here (%v): XIDs are not checked", err)
		args = append(args, "-kmsg-path", os.DevNull)
	} else {
		f.Close()
	}
	res, rep := checkJSON(t, args...)
	t.Logf("%s", runCheck(t, args...).stdout)
	require.Equal(t, exitHealthy, res.code, "%+v", rep.Findings)
	require.Len(t, rep.GPUs, len(rows))
	for _, row := range rows {
		index, uuid, _ := strings.Cut(row, ", ")
		i, err := strconv.Atoi(index)
		require.NoError(t, err)
		assert.Equal(t, uuid, rep.GPUs[i].UUID, "GPU %d", i)
		assert.True(t, rep.GPUs[i].Up)
	}
}
