// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package clock // import "github.com/otelcol-gpu/otelcol-gpu/internal/clock"

import (
	"slices"
	"sync"
	"time"
)

// Fake is a clock that moves only when its test moves it. Its timers and tickers fire on the
// move that reaches them. It is safe for concurrent use: the code under test reads it and waits
// on it from its own goroutines.
type Fake struct {
	mu  sync.Mutex
	now time.Time
	// waiting are the timers and tickers that have not fired (tickers: not stopped) yet.
	waiting []*fakeTimer
}

var _ Clock = (*Fake)(nil)

type fakeTimer struct {
	clock  *Fake
	at     time.Time
	period time.Duration // a ticker's; 0 for a timer
	ch     chan time.Time
}

// NewFake returns a clock at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now is the clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer fires on the move that takes the clock d past now.
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.add(c.now.Add(d), 0)
}

// TimerAt fires at once if the clock has reached t, else on the move that reaches it.
func (c *Fake) TimerAt(t time.Time) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.add(t, 0)
}

// NewTicker ticks on each move that passes one or more of its periods: once, as a late reader
// of a time.Ticker gets one tick.
func (c *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return fakeTicker{c.add(c.now.Add(d), d)}
}

// add makes a timer due at; c.mu is held.
func (c *Fake) add(at time.Time, period time.Duration) *fakeTimer {
	t := &fakeTimer{clock: c, at: at, period: period, ch: make(chan time.Time, 1)}
	if period == 0 && !c.now.Before(at) {
		t.ch <- c.now
		return t
	}
	c.waiting = append(c.waiting, t)
	return t
}

// Advance moves the clock on by d, firing what it reaches.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveTo(c.now.Add(d))
}

// AdvanceToOnly moves the clock to the one timer or tick due within d from now, firing it,
// when exactly one is; it reports how far it moved and whether it did. A test polls it to let
// one known wait end (the deadline of a call it knows is stuck, the pause of a retry loop) and
// never one that is merely under way: while another is due as soon, the clock stays.
func (c *Fake) AdvanceToOnly(d time.Duration) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var due []*fakeTimer
	for _, t := range c.waiting {
		if !t.at.After(c.now.Add(d)) {
			due = append(due, t)
		}
	}
	if len(due) != 1 {
		return 0, false
	}
	moved := max(due[0].at.Sub(c.now), 0)
	c.moveTo(due[0].at)
	return moved, true
}

// Waiting is the number of timers and tickers that have neither fired nor been stopped.
func (c *Fake) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// moveTo sets the clock to t and fires what is due; c.mu is held.
func (c *Fake) moveTo(t time.Time) {
	if t.After(c.now) {
		c.now = t
	}
	c.waiting = slices.DeleteFunc(c.waiting, func(w *fakeTimer) bool {
		if c.now.Before(w.at) {
			return false
		}
		select {
		case w.ch <- c.now:
		default: // a tick the reader has not taken yet
		}
		if w.period == 0 {
			return true
		}
		w.at = w.at.Add((c.now.Sub(w.at)/w.period + 1) * w.period)
		return false
	})
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop takes the timer off the clock, reporting whether it had not fired yet.
func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.waiting, t)
	if i < 0 {
		return false
	}
	c.waiting = slices.Delete(c.waiting, i, i+1)
	return true
}

type fakeTicker struct{ *fakeTimer }

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }
