// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package healthdata names the agents' GPU health data, once: what the k8s_gpu_health connector
// judges, and what the gpu_health_filter processor keeps when a gateway forwards it to the
// gateway that writes it. The names are the gpu receiver's (receiver/gpureceiver/metadata.yaml).
package healthdata

import (
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The gpu receiver's metrics and event that carry GPU health.
const (
	// GPUHealth is gpu_health{condition}, per GPU: 0 ok, 1 warning, 2 fatal.
	GPUHealth = "gpu_health"
	// DevicesDetected and ConfiguredGPUCount are the node's GPU count, and what it should be.
	DevicesDetected    = "gpu_devices_detected"
	ConfiguredGPUCount = "configured_gpu_count"
	// XIDEvent is the event name of the log record of one XID.
	XIDEvent = "gpu.xid"
)

// Metrics are the metrics of GPU health.
var Metrics = []string{GPUHealth, DevicesDetected, ConfiguredGPUCount}

// IsMetric reports whether name is a metric of GPU health.
func IsMetric(name string) bool {
	return name == GPUHealth || name == DevicesDetected || name == ConfiguredGPUCount
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
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.EventName() != XIDEvent })
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
}
