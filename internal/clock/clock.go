// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package clock is the time of every component that reads the time or waits on it: deadlines,
// retries, refresh loops, rates, caches and the simulated GPUs' scenarios. The collector runs on
// Real; tests run on a Fake they move by hand, so that nothing a test checks depends on how
// fast the machine runs it.
package clock // import "github.com/otelcol-gpu/otelcol-gpu/internal/clock"

import "time"

// Clock tells the time and makes timers and tickers on it.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, when d has passed.
	NewTimer(d time.Duration) Timer
	// TimerAt fires once, when the clock has reached t. The time is absolute, so a clock that
	// moves between a caller's Now and this call does not make the timer late.
	TimerAt(t time.Time) Timer
	// NewTicker ticks every d; a tick the reader is not ready for is dropped, as time.Ticker's.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so.
	Stop() bool
}

// Ticker is a time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the machine's clock.
type Real struct{}

var _ Clock = Real{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// NewTimer is time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// TimerAt is a time.Timer to t.
func (Real) TimerAt(t time.Time) Timer { return realTimer{time.NewTimer(time.Until(t))} }

// NewTicker is time.NewTicker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// OrReal is c, or Real when c is nil: the clock of a component whose settings leave it unset.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Sleep waits d on c, or until stop closes: it reports whether the whole pause passed.
func Sleep(c Clock, d time.Duration, stop <-chan struct{}) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C():
		return true
	}
}
