// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package fakeclock

import (
	"testing"
	"time"
)

func TestAtFiresOnlyWhenReached(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := New(start)
	select {
	case <-c.At(start):
	default:
		t.Fatal("At(now) must be ready at once")
	}
	due := c.At(start.Add(time.Minute))
	c.Advance(59 * time.Second)
	select {
	case <-due:
		t.Fatal("At fired before the clock reached it")
	default:
	}
	c.Advance(time.Second)
	select {
	case got := <-due:
		if !got.Equal(start.Add(time.Minute)) {
			t.Fatalf("At delivered %v, want %v", got, start.Add(time.Minute))
		}
	default:
		t.Fatal("At did not fire on the Advance that reached it")
	}
}
