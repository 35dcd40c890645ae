// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoundedCallHangs: a call that does not return is given up, the same key is skipped without
// a second call while the first is stuck, other keys go on, and the key is usable again once the
// stuck call returns.
func TestBoundedCallHangs(t *testing.T) {
	g := newCallGuard(10 * time.Millisecond)
	release := make(chan struct{})
	var calls atomic.Int32
	stuck := func() (int, error) { calls.Add(1); <-release; return 1, nil }

	_, err := bounded(g, "/mnt/nfs", stuck)
	require.ErrorIs(t, err, errHung)
	_, err = bounded(g, "/mnt/nfs", stuck)
	require.ErrorIs(t, err, errHung)
	assert.Equal(t, int32(1), calls.Load(), "no second call on a key whose call is stuck")

	v, err := bounded(g, "/", func() (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v, "other keys are not held back")

	close(release)
	require.Eventually(t, func() bool {
		v, err := bounded(g, "/mnt/nfs", func() (int, error) { return 2, nil })
		return err == nil && v == 2
	}, 5*time.Second, time.Millisecond, "the key is usable once the stuck call returned")
}
