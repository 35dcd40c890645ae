// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package deadline

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// A call that does not return is given up when its deadline passes; its lane refuses the next
// call without making it while the first is stuck; other lanes go on; the lane is usable again
// once the stuck call returned, and that call's duration is observed then. The deadlines are on
// a clock the test moves: no assertion depends on how fast the machine runs a call.
func TestKeyedCallHangs(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var observed atomic.Int32
	k := Keyed{Guard: Guard{Timeout: time.Hour, Clock: clk, Observe: func(time.Duration) { observed.Add(1) }}}
	release, entered := make(chan struct{}), make(chan struct{}, 2)
	var calls atomic.Int32
	stuck := func() (int, error) { calls.Add(1); entered <- struct{}{}; <-release; return 1, nil } //nolint:unparam // CallKeyed's signature

	first := make(chan error, 1)
	go func() {
		_, err := CallKeyed(&k, "/mnt/nfs", stuck)
		first <- err
	}()
	select { // the deadline passes once the call is in the kernel, so to speak
	case <-entered:
		clk.Advance(time.Hour)
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck call never started")
	}
	select {
	case err := <-first:
		require.ErrorIs(t, err, ErrLate)
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck call was not given up when its deadline passed")
	}
	_, err := CallKeyed(&k, "/mnt/nfs", stuck)
	require.ErrorIs(t, err, ErrLate)
	assert.Equal(t, int32(1), calls.Load(), "no second call on a lane whose call is stuck")

	// The clock stays: this call can only return by itself.
	v, err := CallKeyed(&k, "/", func() (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v, "other lanes are not held back")
	assert.Equal(t, 1, k.Len(), "only the stuck call's lane is held")

	close(release)
	poll.Until(t, 30*time.Second, "the lane to take calls again after its stuck call returned", func() bool {
		v, err := CallKeyed(&k, "/mnt/nfs", func() (int, error) { return 2, nil })
		return err == nil && v == 2
	})
	assert.Equal(t, 0, k.Len(), "a lane is dropped once its call returned")
	assert.Equal(t, int32(3), observed.Load(), "every call that returned is observed, the late one included")
}
