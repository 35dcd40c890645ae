// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package healthdata picks out the agents' GPU health data, once: what the k8s_gpu_health connector
// judges, and what the gpu_health_filter processor keeps when a gateway forwards it to the
// gateway that writes it. The names are package gpunames's.
package healthdata

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// Metrics are the gpu receiver's metrics that carry GPU health: gpu_health{condition} per GPU
// (0 ok, 1 warning, 2 fatal), the driver's recovery action per GPU, the node's GPU count and
// what it should be, and the newest run of otelcol-gpu-check on the node. Their XIDs are the gpunames.EventGPUXID log records.
var Metrics = []string{gpunames.GPUHealth, gpunames.GPURecoveryAction, gpunames.GPUDevicesDetected, gpunames.ConfiguredGPUCount, gpunames.GPUNodeCheckStatus, gpunames.GPUNodeCheckTimestampSeconds}

// IsMetric reports whether name is a metric of GPU health.
func IsMetric(name string) bool {
	return slices.Contains(Metrics, name)
}

// KeepMetrics removes from md every metric but GPU health, and the resources and scopes left
// without any.
func KeepMetrics(md pmetric.Metrics) {
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return !IsMetric(m.Name()) })
			return sm.Metrics().Len() == 0
		})
		return rm.ScopeMetrics().Len() == 0
	})
}

// KeepLogs removes from ld every log record but XIDs, and the resources and scopes left
// without any.
func KeepLogs(ld plog.Logs) {
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() != gpunames.EventGPUXID })
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
}
