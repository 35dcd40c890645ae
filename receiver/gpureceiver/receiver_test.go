// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// lastScrape is the newest collection a metrics sink received.
func lastScrape(sink *consumertest.MetricsSink) (pmetric.Metrics, bool) {
	all := sink.AllMetrics()
	if len(all) == 0 {
		return pmetric.Metrics{}, false
	}
	return all[len(all)-1], true
}

// startSimulated runs the receiver on a scenario as the collector does, with both pipelines on
// one instance, and returns what they received.
func startSimulated(t *testing.T, scenario string) (*consumertest.MetricsSink, *consumertest.LogsSink) {
	t.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.Backend = BackendSimulated
	cfg.Scenario = scenario
	cfg.NodeName = "gpu-node-07"
	require.NoError(t, cfg.Validate())

	metrics, logs := new(consumertest.MetricsSink), new(consumertest.LogsSink)
	set := receivertest.NewNopSettings(metadata.Type)
	mr, err := f.CreateMetrics(t.Context(), set, cfg, metrics)
	require.NoError(t, err)
	lr, err := f.CreateLogs(t.Context(), set, cfg, logs)
	require.NoError(t, err)
	assert.Same(t, mr, lr, "the pipelines share one receiver")

	host := componenttest.NewNopHost()
	require.NoError(t, mr.Start(t.Context(), host))
	require.NoError(t, lr.Start(t.Context(), host))
	t.Cleanup(func() {
		require.NoError(t, mr.Shutdown(context.Background())) //nolint:usetesting // t.Context() is canceled before cleanups run
		require.NoError(t, lr.Shutdown(context.Background())) //nolint:usetesting // as above
	})
	return metrics, logs
}

// TestReceiverSimulatedXID79: the simulated XID 79, seen through NVML's events and the simulated
// kernel log, is counted once, logged once, takes GPU 3 down, and every series is marked
// simulated.
func TestReceiverSimulatedXID79(t *testing.T) {
	metrics, logs := startSimulated(t, "testdata/scenarios/xid79.yaml")

	poll.Until(t, 20*time.Second, "a collection with XID 79 on GPU 3 and all 8 GPUs", func() bool {
		md, ok := lastScrape(metrics)
		if !ok || md.ResourceMetrics().Len() < 9 {
			return false
		}
		for _, dp := range points(gpuResource(t, md, "3"), "gpu_xid_errors_total") {
			if hasAttrs(dp.Attributes(), "xid", "79") {
				return true
			}
		}
		return false
	})

	md, _ := lastScrape(metrics)
	gpu3 := gpuResource(t, md, "3")
	assert.Equal(t, int64(1), value(t, gpu3, "gpu_xid_errors_total", "xid", "79"))
	assert.Equal(t, int64(0), value(t, gpu3, "gpu_up"))
	for _, gpu := range []string{"0", "1", "2", "4", "5", "6", "7"} {
		assert.Equal(t, int64(1), value(t, gpuResource(t, md, gpu), "gpu_up"), "GPU %s", gpu)
	}
	for i := range md.ResourceMetrics().Len() {
		v, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get("simulated")
		assert.True(t, ok && v.Str() == "true", "every simulated series is marked")
	}

	require.Equal(t, 1, logs.LogRecordCount())
	rl := logs.AllLogs()[0].ResourceLogs().At(0)
	minor, _ := rl.Resource().Attributes().Get("minor_number")
	assert.Equal(t, "3", minor.Str())
	assert.Equal(t, "79", attr(rl.ScopeLogs().At(0).LogRecords().At(0), "xid"))
}

// TestReceiverSimulatedNVLinkXIDs: NVLink XIDs with a Nonfatal and a Fatal verdict in their
// kernel log lines: the first stays a warning, the second makes its GPU's XID health fatal.
// Each is counted once though NVML's event and the kernel log both report it.
func TestReceiverSimulatedNVLinkXIDs(t *testing.T) {
	metrics, logs := startSimulated(t, "testdata/scenarios/nvlink-xids.yaml")
	health := func(md pmetric.Metrics, gpu string) int64 {
		return value(t, gpuResource(t, md, gpu), "gpu_health", "condition", "xid")
	}
	poll.Until(t, 20*time.Second, "a collection with GPU 2's XID health fatal", func() bool {
		md, ok := lastScrape(metrics)
		return ok && md.ResourceMetrics().Len() >= 8 && health(md, "2") == healthFatal
	})
	md, _ := lastScrape(metrics)
	assert.Equal(t, int64(healthWarning), health(md, "1"))
	assert.Equal(t, int64(1), value(t, gpuResource(t, md, "1"), "gpu_xid_errors_total", "xid", "145"))
	assert.Equal(t, int64(1), value(t, gpuResource(t, md, "2"), "gpu_xid_errors_total", "xid", "149"))
	severities := map[string][]string{}
	for _, l := range logs.AllLogs() {
		lr := l.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
		severities[attr(lr, "xid")] = append(severities[attr(lr, "xid")], lr.SeverityText())
	}
	assert.Equal(t, []string{"warning"}, severities["145"])
	assert.Contains(t, severities["149"], "fatal")
}

// TestReceiverWithoutDriver: with no NVML library the receiver starts, reports gpu_nvml_up 0
// and keeps collecting; go-nvml's real dlopen path is exercised.
func TestReceiverWithoutDriver(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.LibraryPath = "/nonexistent/libnvidia-ml.so.1"
	cfg.XID.Kmsg = false
	metrics := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(t.Context(), receivertest.NewNopSettings(metadata.Type), cfg, metrics)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context(), componenttest.NewNopHost()))
	poll.Until(t, 20*time.Second, "two collections without a driver", func() bool { return len(metrics.AllMetrics()) >= 2 })
	require.NoError(t, r.Shutdown(t.Context()))

	md, _ := lastScrape(metrics)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	assert.Equal(t, int64(0), value(t, md.ResourceMetrics().At(0), "gpu_nvml_up"))
}
