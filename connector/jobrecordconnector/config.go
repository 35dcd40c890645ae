// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector"

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// throttleReasonNames are the gpu receiver's clock event reasons (gpu_clock_event_reason's
// reason label).
var throttleReasonNames = []string{
	gpunames.ReasonGPUIdle, gpunames.ReasonClocksSetting, gpunames.ReasonPowerCap, gpunames.ReasonHWSlowdown,
	gpunames.ReasonSyncBoost, gpunames.ReasonSWThermal, gpunames.ReasonHWThermal, gpunames.ReasonHWPowerBrake,
	gpunames.ReasonDisplayClocks, gpunames.ReasonBoardLimit, gpunames.ReasonReliability,
}

// Config is the job_record connector's configuration.
type Config struct {
	// JobLabels are the labels (resource or data point attributes) whose values identify a
	// job, the same on every node it runs on. A series without all of them is no job's.
	JobLabels []string `mapstructure:"job_labels"`
	// UserLabel is the label that names the job's user.
	UserLabel string `mapstructure:"user_label"`
	// EndAfter is how long a job must have sent no series before it counts as ended.
	EndAfter time.Duration `mapstructure:"end_after"`
	// MaxGap is the longest interval between two collections of a GPU that still counts as
	// known time; a longer gap is unknown_seconds (gpureport's -max-gap).
	MaxGap time.Duration `mapstructure:"max_gap"`
	// CheckInterval is how often ended jobs are looked for and the totals checkpointed.
	CheckInterval time.Duration `mapstructure:"check_interval"`
	// Storage is the storage extension (file_storage) that keeps the totals across restarts;
	// without it they live in memory only.
	Storage *component.ID `mapstructure:"storage"`
	// ThrottleReasons are the clock event reasons that count as throttled.
	ThrottleReasons []string `mapstructure:"throttle_reasons"`
	// The verdict's thresholds, percent, as gpureport's flags of the same names.
	IdleBelow        float64 `mapstructure:"idle_below"`
	BusyAtLeast      float64 `mapstructure:"busy_at_least"`
	LowSMActiveBelow float64 `mapstructure:"low_sm_active_below"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; each error names its key.
func (c *Config) Validate() error {
	var errs []error
	if len(c.JobLabels) == 0 {
		errs = append(errs, errors.New("job_labels: must name at least one label"))
	}
	for i, l := range c.JobLabels {
		if l == "" {
			errs = append(errs, fmt.Errorf("job_labels[%d]: must not be empty", i))
		} else if slices.Index(c.JobLabels, l) != i {
			errs = append(errs, fmt.Errorf("job_labels: %q is listed twice", l))
		}
	}
	if c.UserLabel == "" {
		errs = append(errs, errors.New("user_label: must not be empty (username on OpenPAI's task labels)"))
	}
	if c.EndAfter <= 0 {
		errs = append(errs, fmt.Errorf("end_after: must be positive, got %s", c.EndAfter))
	}
	if c.MaxGap <= 0 {
		errs = append(errs, fmt.Errorf("max_gap: must be positive, got %s", c.MaxGap))
	}
	if c.CheckInterval <= 0 || c.CheckInterval > c.EndAfter {
		errs = append(errs, fmt.Errorf("check_interval: must be positive and at most end_after (%s), got %s", c.EndAfter, c.CheckInterval))
	}
	for i, r := range c.ThrottleReasons {
		if !slices.Contains(throttleReasonNames, r) {
			errs = append(errs, fmt.Errorf("throttle_reasons[%d]: unknown reason %q; one of %v", i, r, throttleReasonNames))
		}
	}
	for _, p := range []struct {
		key string
		v   float64
	}{{"idle_below", c.IdleBelow}, {"busy_at_least", c.BusyAtLeast}, {"low_sm_active_below", c.LowSMActiveBelow}} {
		if p.v < 0 || p.v > 100 {
			errs = append(errs, fmt.Errorf("%s: must be a percent from 0 to 100, got %g", p.key, p.v))
		}
	}
	if c.IdleBelow > c.BusyAtLeast {
		errs = append(errs, fmt.Errorf("idle_below (%g) must not exceed busy_at_least (%g)", c.IdleBelow, c.BusyAtLeast))
	}
	return errors.Join(errs...)
}
