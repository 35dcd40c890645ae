// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package poll

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failure string
}

func (*recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failure = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	Until(r, time.Minute, "the third check", func() bool { return calls.Add(1) == 3 })
	assert.Empty(t, r.failure)
	assert.Equal(t, int32(3), calls.Load())
}

func TestUntilNoErrorFailsWithWhatAndTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	UntilNoError(r, 0, "the kubelet", func() error { return errors.New("connection refused") })
	assert.Equal(t, "waited 0s for the kubelet: connection refused", r.failure)
}

func TestForEndsAtAPermanentError(t *testing.T) {
	exited := errors.New("etcd exited")
	var calls atomic.Int32
	err := For(time.Minute, func() error {
		if calls.Add(1) == 2 {
			return Permanent(exited)
		}
		return errors.New("not yet")
	})
	assert.Equal(t, exited, err, "the error itself, unwrapped")
	assert.Equal(t, int32(2), calls.Load(), "no check after it")
}
