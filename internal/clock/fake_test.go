// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var start = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTimerFiresOnlyWhenReached(t *testing.T) {
	c := NewFake(start)
	assert.True(t, fired(c.TimerAt(start).C()), "a timer at now is ready at once")
	due := c.NewTimer(time.Minute)
	c.Advance(59 * time.Second)
	assert.False(t, fired(due.C()), "fired before the clock reached it")
	c.Advance(time.Second)
	select {
	case got := <-due.C():
		assert.Equal(t, start.Add(time.Minute), got)
	default:
		t.Fatal("the timer did not fire on the move that reached it")
	}
	assert.False(t, due.Stop(), "a fired timer cannot be stopped")
	assert.Zero(t, c.Waiting())
}

func TestStoppedTimerNeverFires(t *testing.T) {
	c := NewFake(start)
	tm := c.NewTimer(time.Second)
	assert.True(t, tm.Stop())
	c.Advance(time.Hour)
	assert.False(t, fired(tm.C()))
	assert.Zero(t, c.Waiting())
}

// A ticker ticks once per move however many periods the move spans, then on its next period.
func TestTickerTicksOncePerMove(t *testing.T) {
	c := NewFake(start)
	tk := c.NewTicker(10 * time.Second)
	c.Advance(9 * time.Second)
	assert.False(t, fired(tk.C()))
	c.Advance(26 * time.Second) // 35 s: three periods passed
	assert.True(t, fired(tk.C()))
	assert.False(t, fired(tk.C()), "one tick for one move")
	c.Advance(4 * time.Second) // 39 s
	assert.False(t, fired(tk.C()))
	c.Advance(time.Second) // 40 s
	assert.True(t, fired(tk.C()))
	tk.Stop()
	assert.Zero(t, c.Waiting())
}

func TestAdvanceToOnly(t *testing.T) {
	c := NewFake(start)
	c.NewTimer(time.Hour) // beyond every window below
	a := c.NewTimer(5 * time.Second)
	b := c.NewTimer(3 * time.Second)
	_, ok := c.AdvanceToOnly(5 * time.Second)
	require.False(t, ok, "two timers are due within 5 s: the clock stays")
	assert.Equal(t, start, c.Now())

	b.Stop()
	moved, ok := c.AdvanceToOnly(5 * time.Second)
	require.True(t, ok)
	assert.Equal(t, 5*time.Second, moved)
	assert.True(t, fired(a.C()))
	_, ok = c.AdvanceToOnly(5 * time.Second)
	assert.False(t, ok, "none is due")
}
