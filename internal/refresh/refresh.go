// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package refresh runs a cache's refresh now and then on its own interval, in the background,
// so that readers of the cache never wait on what it reads.
package refresh // import "github.com/otelcol-gpu/otelcol-gpu/internal/refresh"

import (
	"sync"
	"time"
)

// Ticker makes the clock of a loop: ticks every interval, and what stops them. Tests pass a
// channel of their own.
type Ticker func(interval time.Duration) (ticks <-chan time.Time, stop func())

// RealTicker is time's ticker.
func RealTicker(interval time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(interval)
	return t.C, t.Stop
}

// Loop calls a function at start and on every tick until Stop.
type Loop struct {
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Start runs f now and then on each tick of newTicker(interval).
func Start(interval time.Duration, newTicker Ticker, f func()) *Loop {
	l := &Loop{stop: make(chan struct{}), done: make(chan struct{})}
	ticks, stopTicker := newTicker(interval)
	go func() {
		defer close(l.done)
		defer stopTicker()
		for {
			f()
			select {
			case <-l.stop:
				return
			case <-ticks:
			}
		}
	}()
	return l
}

// Stop ends the loop and waits for a call of f under way.
func (l *Loop) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}
