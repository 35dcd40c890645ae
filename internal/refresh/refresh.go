// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package refresh runs a cache's refresh now and then on its own interval, in the background,
// so that readers of the cache never wait on what it reads.
package refresh // import "github.com/otelcol-gpu/otelcol-gpu/internal/refresh"

import (
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// Loop calls a function at start and on every tick until Stop.
type Loop struct {
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Start runs f now and then every interval of clk.
func Start(interval time.Duration, clk clock.Clock, f func()) *Loop {
	l := &Loop{stop: make(chan struct{}), done: make(chan struct{})}
	ticker := clk.NewTicker(interval)
	go func() {
		defer close(l.done)
		defer ticker.Stop()
		for {
			f()
			select {
			case <-l.stop:
				return
			case <-ticker.C():
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
