// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurmtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
)

func TestSteps(t *testing.T) {
	var s Steps
	want := slurm.Process{Location: slurm.Location{CgroupVersion: 1, JobID: "4", Step: "0"}, Job: slurm.Job{ID: "4"}}
	s.Set(10, want)
	s.SetOutside(11)

	p, ok, err := s.StepOf(10)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, want, p)

	_, ok, err = s.StepOf(11)
	require.NoError(t, err)
	assert.False(t, ok)

	s.Exit(10)
	_, _, err = s.StepOf(10)
	require.Error(t, err)
}
