// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 3, 4, 15, 42, 0, 0, time.UTC)

func TestFlagsDefaults(t *testing.T) {
	t.Setenv("PROM_URL", "http://prometheus:9090")
	c, err := parseFlags(nil, io.Discard, now)
	require.NoError(t, err)
	assert.Equal(t, "http://prometheus:9090", c.prometheus)
	assert.Equal(t, time.Date(2026, 3, 4, 15, 0, 0, 0, time.UTC), c.opts.End, "now, to the hour")
	assert.Equal(t, c.opts.End.Add(-7*24*time.Hour), c.opts.Start)
	assert.Equal(t, 10.0, c.opts.IdleBelow)
	assert.Equal(t, 5*time.Minute, c.opts.MaxGap)

	c, err = parseFlags([]string{"-demo"}, io.Discard, now)
	require.NoError(t, err, "-demo ignores PROM_URL")
	assert.Empty(t, c.prometheus)
}

func TestFlagsPeriod(t *testing.T) {
	c, err := parseFlags([]string{"-prometheus", "http://p", "-start", "2026-01-01T00:00:00Z", "-end", "2026-01-02T12:00:00Z"}, io.Discard, now)
	require.NoError(t, err)
	assert.Equal(t, 36*time.Hour, c.opts.End.Sub(c.opts.Start))
	c, err = parseFlags([]string{"-prometheus", "http://p", "-end", "2026-01-02T12:00:00Z", "-period", "24h"}, io.Discard, now)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), c.opts.Start)
}

func TestFlagsErrors(t *testing.T) {
	t.Setenv("PROM_URL", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-prometheus (or PROM_URL) or -demo: give one of them"},
		{[]string{"-demo", "-prometheus", "http://p"}, "-prometheus (or PROM_URL) or -demo: give one of them"},
		{[]string{"-demo", "-end", "yesterday"}, `-end: parsing time "yesterday"`},
		{[]string{"-demo", "-start", "2026-01-02"}, `-start: parsing time "2026-01-02"`},
		{[]string{"-demo", "-period", "-1h"}, "start (2026-03-04T16:00:00Z) must be before end (2026-03-04T15:00:00Z)"},
		{[]string{"-demo", "-max-gap", "0s"}, "max-gap must be positive"},
		{[]string{"-demo", "-idle-below", "120"}, "idle thresholds are percentages between 0 and 100"},
		{[]string{"-demo", "-bucket", "0s"}, "bucket and chunk must be positive"},
		{[]string{"-demo", "-nodes-per-query", "0"}, "nodes-per-query must be positive"},
		{[]string{"-demo", "stray"}, `unexpected arguments ["stray"]`},
	} {
		_, err := parseFlags(tc.args, io.Discard, now)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want, tc.args)
	}
}
