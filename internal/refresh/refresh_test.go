// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package refresh

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

func TestLoopRunsAtStartAndOnEachTick(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	calls := make(chan struct{}, 10)
	l := Start(time.Hour, clk, func() { calls <- struct{}{} })
	wait := func() {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("no call within 10s")
		}
	}
	wait()
	clk.Advance(time.Hour)
	wait()
	l.Stop()
	l.Stop()
	assert.Zero(t, clk.Waiting(), "the ticker is stopped with the loop")
	assert.Empty(t, calls, "no call after Stop")
}
