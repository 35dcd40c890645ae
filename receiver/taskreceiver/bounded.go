// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"sync"
	"time"
)

var errHung = errors.New("did not return in time")

// callGuard bounds system calls that can block forever in the kernel: statfs(2) on a mount whose
// NFS server is gone, a read of /proc/<pid>/cmdline of a process stuck in state D while holding
// its memory lock. A key (the mount, the pid) whose call has not returned is skipped, without a
// new call, until that call returns, so stuck goroutines cannot pile up.
type callGuard struct {
	timeout  time.Duration
	mu       sync.Mutex
	inFlight map[string]bool
}

func newCallGuard(timeout time.Duration) *callGuard {
	return &callGuard{timeout: timeout, inFlight: map[string]bool{}}
}

func bounded[T any](g *callGuard, key string, call func() (T, error)) (T, error) {
	var zero T
	g.mu.Lock()
	if g.inFlight[key] {
		g.mu.Unlock()
		return zero, errHung
	}
	g.inFlight[key] = true
	g.mu.Unlock()

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		g.mu.Lock()
		delete(g.inFlight, key)
		g.mu.Unlock()
		done <- result{v, err}
	}()
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer.C:
		return zero, errHung
	}
}
