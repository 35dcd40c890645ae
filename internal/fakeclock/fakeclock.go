// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package fakeclock is a clock that tests move by hand, so that what depends on time (rates,
// scenarios, zombie delays) does not depend on how fast the test runs.
package fakeclock // import "github.com/otelcol-gpu/otelcol-gpu/internal/fakeclock"

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use: the code under test reads it from its own goroutines.
type Clock struct {
	mu      sync.Mutex
	t       time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// New returns a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// At delivers the clock's time once it has reached t: at once if it already has, else on the
// Advance that gets there. The deadline is absolute, so an Advance between a caller's reading
// of Now and its call of At is not lost.
func (c *Clock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !c.t.Before(t) {
		ch <- c.t
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: t, ch: ch})
	return ch
}

// Advance moves the clock on by d and wakes every At that is due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	pending := c.waiters[:0]
	for _, w := range c.waiters {
		if c.t.Before(w.at) {
			pending = append(pending, w)
			continue
		}
		w.ch <- c.t
	}
	c.waiters = pending
}
