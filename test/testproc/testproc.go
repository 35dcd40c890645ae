// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package testproc is what the real-node and real-Slurm harnesses ask of the daemons they start:
// whether a PID is still the process they started (its start time), whether it is a zombie, and
// the end of its log for a failure's message.
package testproc // import "github.com/otelcol-gpu/otelcol-gpu/test/testproc"

import (
	"os"
	"strings"

	"github.com/prometheus/procfs"
)

// StartTime is when the process started, in clock ticks since boot: with the PID, it tells the
// process a harness started from a later one given the same PID.
func StartTime(pid int) (uint64, bool) {
	stat, ok := procStat(pid)
	return stat.Starttime, ok
}

// Zombie reports whether the process has exited and waits for its parent to reap it.
func Zombie(pid int) bool {
	stat, ok := procStat(pid)
	return ok && stat.State == "Z"
}

func procStat(pid int) (procfs.ProcStat, bool) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, false
	}
	stat, err := proc.Stat()
	return stat, err == nil
}

// Tail is the last lines of a log, or why it could not be read.
func Tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
