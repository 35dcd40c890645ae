// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// NewFactory returns the job_record connector's factory.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithMetricsToLogs(createMetricsToLogs, metadata.MetricsToLogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		// What job-cost.yaml and gpureport sum a job by.
		JobLabels: []string{"virtual_cluster", "username", "job_name"},
		UserLabel: "username",
		// Long enough for an agent's restart or a short outage of its link to pass without
		// ending its jobs; gpureport's -max-gap for the same reason.
		EndAfter:      10 * time.Minute,
		MaxGap:        5 * time.Minute,
		CheckInterval: 30 * time.Second,
		// The reasons that slow a job down; gpu_idle, clocks_setting, sync_boost and
		// display_clocks are the GPU doing what it was told.
		ThrottleReasons:  []string{"power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "board_limit", "reliability"},
		IdleBelow:        10,
		BusyAtLeast:      80,
		LowSMActiveBelow: 30,
	}
}

func createMetricsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Metrics, error) {
	return newConnector(cfg.(*Config), set, next, clock.Real{})
}
