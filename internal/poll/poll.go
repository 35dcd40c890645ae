// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package poll waits, in tests, for what another goroutine or process brings about, and fails
// the test saying what it waited for once a deadline has passed. The deadline bounds a hung
// peer; it is never a performance assertion. Every test that polls goes through it.
package poll // import "github.com/otelcol-gpu/otelcol-gpu/internal/poll"

import (
	"errors"
	"testing"
	"time"
)

// maxPause spaces the checks of a slow wait: often enough to add little to a test, seldom
// enough not to load a peer that is answering HTTP requests.
const maxPause = 100 * time.Millisecond

var errNotYet = errors.New("not yet")

// Until checks cond until it holds; once within has passed it fails tb with what it waited for.
func Until(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	UntilNoError(tb, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNoError is Until for a check that says what is still wrong: the last error is in the
// failure.
func UntilNoError(tb testing.TB, within time.Duration, what string, check func() error) {
	tb.Helper()
	if err := For(within, check); err != nil {
		tb.Fatalf("waited %s for %s: %v", within, what, err)
	}
}

// For checks until check returns nil, and returns its last error once within has passed: the
// same wait for code that has no test to fail (a harness's set-up and teardown). An error that
// check marks Permanent ends the wait at once.
func For(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		err := check()
		if p, ok := errors.AsType[permanent](err); ok {
			return p.err
		}
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// Permanent marks err as one that no later check can cure (the process waited for has exited,
// a file cannot be opened): the wait ends with it at once instead of when within has passed.
func Permanent(err error) error { return permanent{err} }

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }
