// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package refresh

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLoopRunsAtStartAndOnEachTick(t *testing.T) {
	ticks := make(chan time.Time)
	stopped := false
	calls := make(chan struct{}, 10)
	l := Start(time.Hour, func(time.Duration) (<-chan time.Time, func()) { return ticks, func() { stopped = true } }, func() { calls <- struct{}{} })
	wait := func() {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("no call within 10s")
		}
	}
	wait()
	ticks <- time.Now()
	wait()
	l.Stop()
	l.Stop()
	assert.True(t, stopped, "the ticker is stopped with the loop")
	assert.Empty(t, calls, "no call after Stop")
}
