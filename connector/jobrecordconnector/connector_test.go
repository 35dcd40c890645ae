// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// host offers its extensions to the connector.
type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

var storageID = component.MustNewIDWithName("file_storage", "jobs")

// startFileStorage starts a real file_storage extension on dir, as the gateway's.
func startFileStorage(t *testing.T, dir string) extension.Extension {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	cfg.Compaction.Directory = dir
	ext, err := f.Create(t.Context(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(t.Context(), componenttest.NewNopHost()))
	return ext
}

// TestRestartLosesNothing: the totals are checkpointed into file_storage; the gateway stops
// without a word after the checkpoint (what came after it is lost with the process), a new
// one starts from the checkpoint, the job goes on and ends: one record, whose held time and
// energy are the whole job's, as if no restart had happened.
func TestRestartLosesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	cfg := testConfig()
	cfg.Storage = &storageID
	batch := kubeletBatch(t)
	clk := clock.NewFake(t0)
	collect := func(c *recorder, i int) {
		ts := t0.Add(time.Duration(i) * interval)
		moveTo(clk, ts)
		consume(t, c, gpuSeries(ts, kubeletNodeGPUs("gpu-node-07", i)...))
		consume(t, c, at(batch, ts))
	}

	ext := startFileStorage(t, dir)
	first, firstSink := newTestRecorder(t, cfg, clk)
	require.NoError(t, first.Start(ctx, host{storageID: ext}))
	for i := range 10 {
		collect(first, i)
	}
	first.check(ctx) // the checkpoint, as the loop writes it every check_interval
	collect(first, 10)
	collect(first, 11)
	// The process dies: no Shutdown, no last checkpoint; its storage closes with it.
	first.stopLoop()
	require.NoError(t, first.client.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
	assert.Empty(t, firstSink.AllLogs())

	// The gateway comes back a minute later; the agents resend from collection 12 on.
	ext = startFileStorage(t, dir)
	t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.WithoutCancel(ctx))) })
	second, sink := newTestRecorder(t, cfg, clk)
	require.NoError(t, second.Start(ctx, host{storageID: ext}))
	require.Len(t, second.totals.Jobs, 7, "the jobs' totals restored from the checkpoint")
	for i := 12; i < 21; i++ {
		collect(second, i)
	}
	clk.Advance(cfg.EndAfter)
	second.check(ctx)
	got := records(t, sink)
	require.Len(t, got, 7)
	alice := got["alice~resnet"]
	assert.Equal(t, t0, alice.Start)
	assert.InDelta(t, 2*20*interval.Hours(), alice.HeldHours, 1e-9, "the collections after the checkpoint are counted from it")
	assert.InDelta(t, 2*250*20*interval.Seconds(), alice.EnergyJoules, 1e-6)
	require.NoError(t, second.Shutdown(ctx))

	// A third start finds nothing left to end: the record is not sent twice.
	third, thirdSink := newTestRecorder(t, cfg, clk)
	require.NoError(t, third.Start(ctx, host{storageID: ext}))
	assert.Empty(t, third.totals.Jobs)
	clk.Advance(cfg.EndAfter)
	third.check(ctx)
	assert.Empty(t, thirdSink.AllLogs())
	require.NoError(t, third.Shutdown(ctx))
}

// TestRestoredJobsGetEndAfter: a gateway that was down longer than end_after does not end
// every job at its first check: each restored job has end_after from the start to be seen.
func TestRestoredJobsGetEndAfter(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	cfg := testConfig()
	cfg.Storage = &storageID
	clk := clock.NewFake(t0)
	ext := startFileStorage(t, dir)
	t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.WithoutCancel(ctx))) })
	first, _ := newTestRecorder(t, cfg, clk)
	require.NoError(t, first.Start(ctx, host{storageID: ext}))
	consume(t, first, at(kubeletBatch(t), t0))
	require.NoError(t, first.Shutdown(ctx))

	clk.Advance(time.Hour)
	second, sink := newTestRecorder(t, cfg, clk)
	require.NoError(t, second.Start(ctx, host{storageID: ext}))
	clk.Advance(cfg.EndAfter - time.Second)
	second.check(ctx)
	assert.Empty(t, sink.AllLogs())
	clk.Advance(time.Second)
	second.check(ctx)
	assert.Len(t, records(t, sink), 7)
	require.NoError(t, second.Shutdown(ctx))
}

// TestStorageErrors: a storage that is not there, or not a storage, fails the start with the key.
func TestStorageErrors(t *testing.T) {
	cfg := testConfig()
	cfg.Storage = &storageID
	c, _ := newTestRecorder(t, cfg, clock.NewFake(t0))
	err := c.Start(t.Context(), host{})
	require.ErrorContains(t, err, `storage: extension "file_storage/jobs" is not in the service's extensions`)
	err = c.Start(t.Context(), host{storageID: struct {
		component.StartFunc
		component.ShutdownFunc
	}{}})
	require.ErrorContains(t, err, `storage: extension "file_storage/jobs" is not a storage extension`)
}

// TestLoopEndsJobs: started, the connector looks for ended jobs every check_interval on its
// own.
func TestLoopEndsJobs(t *testing.T) {
	ctx := t.Context()
	clk := clock.NewFake(t0)
	cfg := testConfig()
	c, sink := newTestRecorder(t, cfg, clk)
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { assert.NoError(t, c.Shutdown(context.WithoutCancel(ctx))) })
	consume(t, c, at(kubeletBatch(t), t0))
	consume(t, c, at(kubeletBatch(t), t0.Add(interval)))
	deadline := time.Now().Add(10 * time.Second)
	for sink.LogRecordCount() < 7 {
		require.True(t, time.Now().Before(deadline), "no records 10 s (real time) after end_after passed on the clock; got %d", sink.LogRecordCount())
		clk.Advance(cfg.CheckInterval)
		time.Sleep(time.Millisecond)
	}
	assert.Len(t, records(t, sink), 7)
}

// TestRefusedRecordsAreSentAgain: a record the next consumer refuses stays, and goes on the
// next check.
func TestRefusedRecordsAreSentAgain(t *testing.T) {
	ctx := t.Context()
	clk := clock.NewFake(t0)
	cfg := testConfig()
	sink := &consumertest.LogsSink{}
	refuse := true
	next, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		if refuse {
			return errors.New("queue full")
		}
		return sink.ConsumeLogs(ctx, ld)
	})
	require.NoError(t, err)
	c, err := newConnector(cfg, connectortest.NewNopSettings(metadata.Type), next, clk)
	require.NoError(t, err)
	consume(t, c, at(kubeletBatch(t), t0))
	clk.Advance(cfg.EndAfter)
	c.check(ctx)
	assert.Len(t, c.totals.Jobs, 7, "kept")
	refuse = false
	c.check(ctx)
	assert.Len(t, records(t, sink), 7)
	assert.Empty(t, c.totals.Jobs)
}

// TestTelemetry: the jobs held, the records sent and the failed checkpoints are counted.
func TestTelemetry(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.WithoutCancel(t.Context()))) })
	clk := clock.NewFake(t0)
	cfg := testConfig()
	sink := &consumertest.LogsSink{}
	set := metadatatest.NewSettings(tt)
	c, err := newConnector(cfg, set, sink, clk)
	require.NoError(t, err)
	c.client = failingStorage{storage.NewNopClient()}
	consume(t, c, at(kubeletBatch(t), t0))
	metadatatest.AssertEqualJobRecordJobsRunning(t, tt, []metricdata.DataPoint[int64]{{Value: 7}}, metricdatatest.IgnoreTimestamp())
	clk.Advance(cfg.EndAfter)
	c.check(t.Context())
	metadatatest.AssertEqualJobRecordRecordsTotal(t, tt, []metricdata.DataPoint[int64]{{Value: 7}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualJobRecordCheckpointErrorsTotal(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualJobRecordJobsRunning(t, tt, []metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
}

// failingStorage refuses every write.
type failingStorage struct{ storage.Client }

func (failingStorage) Set(context.Context, string, []byte) error { return errors.New("disk full") }
