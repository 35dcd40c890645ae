// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package healthdata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

func TestKeepMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	gpu := md.ResourceMetrics().AppendEmpty()
	gpu.Resource().Attributes().PutStr("uuid", "GPU-1")
	for _, name := range []string{"gpu_utilization", gpunames.GPUHealth, "gpu_up"} {
		gpu.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName(name)
	}
	node := md.ResourceMetrics().AppendEmpty()
	ms := node.ScopeMetrics().AppendEmpty().Metrics()
	for _, name := range []string{gpunames.GPUDevicesDetected, gpunames.ConfiguredGPUCount, "gpu_nvml_up"} {
		ms.AppendEmpty().SetName(name)
	}
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("task_cpu_percent")

	KeepMetrics(md)
	require.Equal(t, 2, md.ResourceMetrics().Len(), "the task's resource had nothing left")
	assert.Equal(t, 1, md.ResourceMetrics().At(0).ScopeMetrics().Len())
	assert.Equal(t, gpunames.GPUHealth, md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name())
	v, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("uuid")
	assert.Equal(t, "GPU-1", v.Str(), "the resource is kept whole")
	assert.Equal(t, 2, md.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics().Len())
}

func TestKeepLogs(t *testing.T) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lrs.AppendEmpty().SetEventName(gpunames.EventGPUXID)
	lrs.AppendEmpty().SetEventName("k8s.pod.phase.changed")
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	KeepLogs(ld)
	require.Equal(t, 1, ld.LogRecordCount())
	assert.Equal(t, gpunames.EventGPUXID, ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).EventName())
	assert.Equal(t, 1, ld.ResourceLogs().Len())
}
