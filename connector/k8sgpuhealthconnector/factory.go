// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
)

// NewFactory creates the k8s_gpu_health connector factory: the agents' metrics and logs in, the
// writer's metrics and its quarantine's log records out.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithMetricsToMetrics(createMetricsToMetrics, metadata.MetricsToMetricsStability),
		connector.WithLogsToMetrics(createLogsToMetrics, metadata.LogsToMetricsStability),
		connector.WithMetricsToLogs(createMetricsToLogs, metadata.MetricsToLogsStability),
		connector.WithLogsToLogs(createLogsToLogs, metadata.LogsToLogsStability),
	)
}

func createDefaultConfig() component.Config {
	enabled := StateFault{Enabled: true}
	return &Config{
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		LogsBuilderConfig:    metadata.DefaultLogsBuilderConfig(),
		AuthType:             kubeclient.AuthTypeServiceAccount,
		SyncTimeout:          10 * time.Second,
		Interval:             30 * time.Second,
		// An agent sends within seconds when its gateway is up (its queue flushes every
		// second); data ten minutes old has waited in a queue through an outage.
		MaxDataAge: 10 * time.Minute,
		Faults: FaultsConfig{
			// Copies: a configuration's list is decoded into the default's.
			XIDResolutions:      slices.Clone(actionableResolutions),
			GPULost:             enabled,
			GPUMissing:          enabled,
			DriverHang:          StateFault{Enabled: true, For: 2 * time.Minute},
			DoubleBitECC:        enabled,
			RowRemapPending:     enabled,
			RowRemapFailed:      enabled,
			RetiredPagesPending: enabled,
			// Links retrain under load changes; a link that stays degraded is the fault.
			PCIeDowngrade: StateFault{Enabled: true, For: 10 * time.Minute},
			// The fabric manager registers GPUs within minutes of a boot; a link may retrain.
			NVLinkFabric: StateFault{Enabled: true, For: 10 * time.Minute},
		},
		// client-go's usual durations (kube-controller-manager's).
		LeaderElection: LeaderElectionConfig{
			LeaseName:     "otelcol-gpu-health",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
		Quarantine: QuarantineConfig{
			DryRun: true,
			Cordon: slices.Clone(Actions),
			// A reset takes one GPU's jobs: the node stays cordoned for the GPU's sake, and a
			// drainer, which selects by the taint, leaves the others running.
			Taint:            []Action{ActionReboot, ActionCheckNVLink, ActionInspectHardware},
			EscalationWindow: 7 * 24 * time.Hour,
			Breaker:          BreakerConfig{MaxShare: 0.1, Window: time.Hour},
			GPUResourceNames: []string{"nvidia.com/gpu", "amd.com/gpu"},
			// NVIDIA's DRA driver, as gpu_attribution's pod_resources::drivers.
			DeviceTaint: DeviceTaintConfig{Enabled: true, Drivers: []string{"gpu.nvidia.com"}, Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
		Validation: ValidationConfig{
			DryRun:      true,
			TaintKey:    ValidationTaintKey,
			TaintEffect: corev1.TaintEffectNoSchedule,
			// The gpu receiver collects every 10s by default: three passes are half a minute.
			Passes: 3,
			// The check is the deeper look (XIDs since boot, NVLinks against the node's peers,
			// the driver version, InfiniBand ports): the gate waits for it where it is on.
			RequireCheck: true,
			// Long enough for a fabric manager's registration after a boot (minutes).
			Timeout: 30 * time.Minute,
		},
	}
}

// writers shares one writer between the connectors the collector makes of one configuration:
// one per pair of pipelines it joins (metrics or logs to metrics or logs), where two judges
// would each see half of the data, and two candidates would stand against each other for the
// Lease. A package variable, as the receivers keep theirs.
var writers sharedcomponent.Registry[*Config, *writer]

// input is one of the connectors that share a writer.
type input struct {
	w       *writer
	release func() (last bool)
}

// acquire is the writer of cfg, sending its metrics to metrics or its log records to logs.
func acquire(cfg *Config, set connector.Settings, metrics consumer.Metrics, logs consumer.Logs) input {
	w, release := writers.Acquire(cfg, func() *writer { return newWriter(cfg, set) })
	if metrics != nil {
		w.metricsOut = metrics
	}
	if logs != nil {
		w.logsOut = logs
	}
	return input{w: w, release: release}
}

func (in input) Start(ctx context.Context, host component.Host) error { return in.w.start(ctx, host) }

// Shutdown stops the writer with the last of its connectors.
func (in input) Shutdown(ctx context.Context) error {
	if in.release() {
		return in.w.shutdown(ctx)
	}
	return nil
}

// Capabilities: the data goes on to the other exporters of its pipeline unchanged.
func (input) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: false} }

type metricsInput struct{ input }

// ConsumeMetrics judges the agents' health states. It never fails: the writer's trouble must
// not hold up the data on its way to the other exporters.
func (in metricsInput) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	in.w.markDirty(in.w.judge.consumeMetrics(md))
	return nil
}

type logsInput struct{ input }

// ConsumeLogs judges the agents' XIDs; it never fails, as ConsumeMetrics.
func (in logsInput) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	in.w.markDirty(in.w.judge.consumeLogs(ld))
	return nil
}

func createMetricsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	return metricsInput{acquire(cfg.(*Config), set, next, nil)}, nil
}

func createLogsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	return logsInput{acquire(cfg.(*Config), set, next, nil)}, nil
}

func createMetricsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Metrics, error) {
	return metricsInput{acquire(cfg.(*Config), set, nil, next)}, nil
}

func createLogsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Logs, error) {
	return logsInput{acquire(cfg.(*Config), set, nil, next)}, nil
}
