// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package deadline bounds calls that can block forever where they cannot be cancelled: a cgo
// call into the GPU driver, statfs(2) on a mount whose NFS server is gone, a read of
// /proc/<pid>/cmdline of a process stuck in state D. A late call keeps running in its goroutine;
// its lane refuses every call after it until it returns, so stuck goroutines cannot pile up.
package deadline // import "github.com/otelcol-gpu/otelcol-gpu/internal/deadline"

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// ErrLate is the error of a call that passed its deadline, or was refused because the call
// before it on its lane still has not returned.
var ErrLate = errors.New("did not return in time")

// Lane is what one call at a time uses: one GPU, one mount, one process.
type Lane struct {
	hung atomic.Bool
}

// Hung is whether a late call on the lane has not returned yet.
func (l *Lane) Hung() bool { return l.hung.Load() }

// Guard is the deadline of a family of calls.
type Guard struct {
	// Timeout is each call's deadline.
	Timeout time.Duration
	// Observe, if set, is given each call's duration when it returns, late ones included, so a
	// latency histogram shows how long hung calls really took.
	Observe func(time.Duration)
	// Clock times the calls and their deadlines; nil is the machine's.
	Clock clock.Clock
}

// Call runs f on lane l under g's deadline.
func Call[T any](g *Guard, l *Lane, f func() (T, error)) (T, error) {
	var zero T
	if l.hung.Load() {
		return zero, ErrLate
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	clk := clock.OrReal(g.Clock)
	start := clk.Now()
	// The deadline is set before the call starts, so that a test which sees the call under way
	// finds its deadline on the clock.
	expired := clk.NewTimer(g.Timeout)
	defer expired.Stop()
	go func() {
		v, err := f()
		if g.Observe != nil {
			g.Observe(clk.Now().Sub(start))
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-expired.C():
		l.hung.Store(true)
		go func() {
			<-done
			l.hung.Store(false)
		}()
		return zero, ErrLate
	}
}

// Keyed are calls under one Guard on lanes by name (a mount, a pid), each lane made on first use
// and dropped once its call has returned, so that a lane lives only as long as its call.
type Keyed struct {
	Guard Guard
	mu    sync.Mutex
	lanes map[string]*Lane
}

// CallKeyed runs f on key's lane under k's deadline.
func CallKeyed[T any](k *Keyed, key string, f func() (T, error)) (T, error) {
	k.mu.Lock()
	if k.lanes == nil {
		k.lanes = map[string]*Lane{}
	}
	l := k.lanes[key]
	if l == nil {
		l = &Lane{}
		k.lanes[key] = l
	}
	k.mu.Unlock()
	v, err := Call(&k.Guard, l, f)
	if !l.hung.Load() {
		k.mu.Lock()
		if k.lanes[key] == l {
			delete(k.lanes, key)
		}
		k.mu.Unlock()
	}
	return v, err
}

// Len is the number of lanes held: those of calls in flight or hung.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.lanes)
}
