// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package healthdata

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"
)

// TestNamesAreTheGPUReceivers: the names are those the agents send.
func TestNamesAreTheGPUReceivers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "receiver", "gpureceiver", "metadata.yaml"))
	require.NoError(t, err)
	var receiver struct {
		Metrics map[string]any `yaml:"metrics"`
		Events  map[string]any `yaml:"events"`
	}
	require.NoError(t, yaml.Unmarshal(data, &receiver))
	for _, m := range Metrics {
		assert.Contains(t, receiver.Metrics, m)
	}
	assert.Contains(t, receiver.Events, XIDEvent)
}

func TestKeepMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	gpu := md.ResourceMetrics().AppendEmpty()
	gpu.Resource().Attributes().PutStr("uuid", "GPU-1")
	for _, name := range []string{"gpu_utilization", GPUHealth, "gpu_up"} {
		gpu.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName(name)
	}
	node := md.ResourceMetrics().AppendEmpty()
	ms := node.ScopeMetrics().AppendEmpty().Metrics()
	for _, name := range []string{DevicesDetected, ConfiguredGPUCount, "gpu_nvml_up"} {
		ms.AppendEmpty().SetName(name)
	}
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("task_cpu_percent")

	KeepMetrics(md)
	require.Equal(t, 2, md.ResourceMetrics().Len(), "the task's resource had nothing left")
	assert.Equal(t, 1, md.ResourceMetrics().At(0).ScopeMetrics().Len())
	assert.Equal(t, GPUHealth, md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name())
	v, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("uuid")
	assert.Equal(t, "GPU-1", v.Str(), "the resource is kept whole")
	assert.Equal(t, 2, md.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics().Len())
}

func TestKeepLogs(t *testing.T) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lrs.AppendEmpty().SetEventName(XIDEvent)
	lrs.AppendEmpty().SetEventName("k8s.pod.phase.changed")
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	KeepLogs(ld)
	require.Equal(t, 1, ld.LogRecordCount())
	assert.Equal(t, XIDEvent, ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).EventName())
	assert.Equal(t, 1, ld.ResourceLogs().Len())
}
