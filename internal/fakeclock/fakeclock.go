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
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
