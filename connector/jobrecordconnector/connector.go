// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// checkpointKey is the storage key of the totals.
const checkpointKey = "totals"

type recorder struct {
	cfg       *Config
	set       connector.Settings
	next      consumer.Logs
	clock     clock.Clock
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder

	mu     sync.Mutex
	totals *totals
	dirty  bool // changed since the last checkpoint
	client storage.Client

	cancel context.CancelFunc // stops the loop
	done   chan struct{}
}

func newConnector(cfg *Config, set connector.Settings, next consumer.Logs, clk clock.Clock) (*recorder, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &recorder{cfg: cfg, set: set, next: next, clock: clk, logger: set.Logger, telemetry: tb, totals: newTotals(), client: storage.NewNopClient()}
	err = tb.RegisterJobRecordJobsRunningCallback(func(_ context.Context, o metric.Int64Observer) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		o.Observe(int64(len(c.totals.Jobs)))
		return nil
	})
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return c, nil
}

func (*recorder) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// Start reads the checkpoint, if a storage extension is configured, and starts looking for
// ended jobs every check_interval.
func (c *recorder) Start(ctx context.Context, host component.Host) error {
	if c.cfg.Storage != nil {
		ext, ok := host.GetExtensions()[*c.cfg.Storage]
		if !ok {
			return fmt.Errorf("storage: extension %q is not in the service's extensions", c.cfg.Storage)
		}
		se, ok := ext.(storage.Extension)
		if !ok {
			return fmt.Errorf("storage: extension %q is not a storage extension", c.cfg.Storage)
		}
		client, err := se.GetClient(ctx, component.KindConnector, c.set.ID, "")
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		c.client = client
		if err := c.restore(ctx); err != nil {
			return errors.Join(err, client.Close(ctx))
		}
	}
	var loopCtx context.Context
	loopCtx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go c.loop(loopCtx)
	return nil
}

// restore reads the checkpoint. Every job restored gets a full end_after from now to be seen
// again: the agents' queues resend what they held while the gateway was down.
func (c *recorder) restore(ctx context.Context) error {
	data, err := c.client.Get(ctx, checkpointKey)
	if err != nil {
		return fmt.Errorf("storage: reading the checkpoint: %w", err)
	}
	if data == nil {
		return nil
	}
	t := newTotals()
	if err := json.Unmarshal(data, t); err != nil {
		// The totals cannot be trusted; the jobs that run on start again from their next
		// collection.
		c.logger.Error("The checkpoint of the running jobs' totals is unreadable and is dropped: jobs running now get records of what follows only",
			zap.Error(err))
		return nil
	}
	now := c.clock.Now()
	for _, j := range t.Jobs {
		j.LastSeen = now
	}
	for _, f := range t.GPUs {
		f.Seen = now
	}
	c.totals = t
	c.logger.Info("Running jobs' totals restored from the checkpoint", zap.Int("jobs", len(t.Jobs)))
	return nil
}

func (c *recorder) loop(ctx context.Context) {
	defer close(c.done)
	ticker := c.clock.NewTicker(c.cfg.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			c.check(ctx)
		}
	}
}

func (c *recorder) stopLoop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
}

// Shutdown stops the loop and writes the checkpoint.
func (c *recorder) Shutdown(ctx context.Context) error {
	c.stopLoop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.telemetry.Shutdown()
	err := c.checkpoint(ctx)
	return errors.Join(err, c.client.Close(ctx))
}

// ConsumeMetrics adds a batch to the running jobs' totals.
func (c *recorder) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.consume(md, c.clock.Now())
	c.dirty = true
	return nil
}

// check emits the record of each job that has sent nothing for end_after, forgets it, and
// writes the checkpoint. A record the next consumer refuses is tried again on the next check.
func (c *recorder) check(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var ended []string
	for k, j := range c.totals.Jobs {
		if now.Sub(j.LastSeen) >= c.cfg.EndAfter {
			ended = append(ended, k)
		}
	}
	slices.Sort(ended)
	if len(ended) > 0 {
		logs := plog.NewLogs()
		rl := logs.ResourceLogs().AppendEmpty()
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector")
		for _, k := range ended {
			r := c.record(c.totals.Jobs[k])
			lr := sl.LogRecords().AppendEmpty()
			r.ToLogRecord(lr)
			lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
		}
		if err := c.next.ConsumeLogs(ctx, logs); err != nil {
			c.logger.Warn("The next component refused the records of ended jobs; they are sent again on the next check",
				zap.Int("jobs", len(ended)), zap.Error(err))
			c.saveIfDirty(ctx)
			return
		}
		c.telemetry.JobRecordRecordsTotal.Add(ctx, int64(len(ended)))
	}
	for _, k := range ended {
		delete(c.totals.Jobs, k)
		c.dirty = true
	}
	c.forgetGPUs(now)
	c.saveIfDirty(ctx)
}

// forgetGPUs drops the facts of GPUs that no running job holds and that sent nothing for
// end_after (a node gone). The facts of a GPU that still reports are kept, so that a job that
// starts on it counts its counters from what they were before the job.
func (c *recorder) forgetGPUs(now time.Time) {
	held := map[string]bool{}
	for _, j := range c.totals.Jobs {
		for _, g := range j.GPUs {
			held[gpuKey(g.NodeName, g.UUID)] = true
		}
	}
	for k, f := range c.totals.GPUs {
		if !held[k] && now.Sub(f.Seen) >= c.cfg.EndAfter {
			delete(c.totals.GPUs, k)
			c.dirty = true
		}
	}
}

func (c *recorder) saveIfDirty(ctx context.Context) {
	if !c.dirty {
		return
	}
	if err := c.checkpoint(ctx); err != nil {
		c.telemetry.JobRecordCheckpointErrorsTotal.Add(ctx, 1)
		c.logger.Warn("Writing the checkpoint of the running jobs' totals failed; tried again on the next check", zap.Error(err))
	}
}

// checkpoint writes the totals; c.mu is held.
func (c *recorder) checkpoint(ctx context.Context) error {
	data, err := json.Marshal(c.totals)
	if err != nil {
		return err
	}
	if err := c.client.Set(ctx, checkpointKey, data); err != nil {
		return fmt.Errorf("storage: writing the checkpoint: %w", err)
	}
	c.dirty = false
	return nil
}
