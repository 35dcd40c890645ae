// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	slurm := configtest.Load[Config](t, NewFactory(), "slurm")
	require.NoError(t, confmap.Validate(slurm))
	storage := component.MustNewIDWithName("file_storage", "jobs")
	want := &Config{
		JobLabels: []string{"slurm_cluster", "slurm_job_id"}, UserLabel: "slurm_user",
		EndAfter: 2 * time.Minute, MaxGap: 90 * time.Second, CheckInterval: 10 * time.Second,
		Storage: &storage, ThrottleReasons: []string{"hw_thermal", "sw_thermal"},
		IdleBelow: 5, BusyAtLeast: 70, LowSMActiveBelow: 20,
	}
	assert.Equal(t, want, slurm)
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{"no_job_labels", "job_labels: must name at least one label"},
		{"empty_job_label", "job_labels[1]: must not be empty"},
		{"job_label_twice", `job_labels: "job_name" is listed twice`},
		{"no_user_label", "user_label: must not be empty"},
		{"zero_end_after", "end_after: must be positive, got 0s"},
		{"zero_max_gap", "max_gap: must be positive, got 0s"},
		{"check_interval_above_end_after", "check_interval: must be positive and at most end_after (1m0s), got 2m0s"},
		{"unknown_throttle_reason", `throttle_reasons[1]: unknown reason "thermal"`},
		{"idle_above_busy", "idle_below (90) must not exceed busy_at_least (80)"},
		{"percent_above_100", "low_sm_active_below: must be a percent from 0 to 100, got 101"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(configtest.Load[Config](t, NewFactory(), tt.name))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
