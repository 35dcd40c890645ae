// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package testproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartTimeAndZombie(t *testing.T) {
	start, ok := StartTime(os.Getpid())
	require.True(t, ok)
	assert.Positive(t, start)
	assert.False(t, Zombie(os.Getpid()))

	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(time.Minute)
	for !Zombie(cmd.Process.Pid) {
		require.True(t, time.Now().Before(deadline), "the exited child never showed as a zombie")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Wait())
	_, ok = StartTime(cmd.Process.Pid)
	assert.False(t, ok, "a reaped process has no start time")
}

func TestTail(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(log, []byte("one\ntwo\nthree\n"), 0o600))
	assert.Equal(t, "two\nthree", Tail(log, 2))
	assert.Equal(t, "one\ntwo\nthree", Tail(log, 10))
	assert.Contains(t, Tail(filepath.Join(t.TempDir(), "none"), 2), "no such file")
}
