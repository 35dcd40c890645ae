// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuhealthfilterprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuhealthfilterprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

// TestKeepsTheGPUReceiversHealth runs the gpu receiver's own collection of a simulated node
// through the processor: of its metrics, the health ones alone go on, on their GPUs' resources;
// a batch with none (a task collection) goes no further.
func TestKeepsTheGPUReceiversHealth(t *testing.T) {
	md, err := gpureceivertest.SimulatedBatch(filepath.Join("..", "..", "distro", "scenarios", "dgx-a100-demo.yaml"))
	require.NoError(t, err)
	f := NewFactory()
	sink := new(consumertest.MetricsSink)
	p, err := f.CreateMetrics(t.Context(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(t.Context())) }()
	assert.True(t, p.Capabilities().MutatesData)

	gpus := len(gpureceivertest.GPUs(md))
	require.NoError(t, p.ConsumeMetrics(t.Context(), md))
	require.Len(t, sink.AllMetrics(), 1)
	kept := map[string]int{}
	for _, rm := range sink.AllMetrics()[0].ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				kept[m.Name()]++
			}
		}
	}
	assert.Equal(t, map[string]int{gpunames.GPUHealth: gpus, gpunames.GPURecoveryAction: gpus, gpunames.GPUDevicesDetected: 1}, kept,
		"the demo sets no configured_gpu_count")

	task := pmetric.NewMetrics()
	task.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("task_cpu_percent")
	require.NoError(t, p.ConsumeMetrics(t.Context(), task))
	assert.Len(t, sink.AllMetrics(), 1, "nothing of a batch without GPU health goes on")
}

func TestKeepsXIDs(t *testing.T) {
	f := NewFactory()
	sink := new(consumertest.LogsSink)
	p, err := f.CreateLogs(t.Context(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lrs.AppendEmpty().SetEventName(gpunames.EventGPUXID)
	lrs.AppendEmpty().SetEventName("k8s.pod.phase.changed")
	require.NoError(t, p.ConsumeLogs(t.Context(), ld))
	require.Len(t, sink.AllLogs(), 1)
	assert.Equal(t, 1, sink.AllLogs()[0].LogRecordCount())

	other := plog.NewLogs()
	other.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().SetEventName("k8s.pod.phase.changed")
	require.NoError(t, p.ConsumeLogs(t.Context(), other))
	assert.Len(t, sink.AllLogs(), 1)
}
