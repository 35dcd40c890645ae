// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// line is one line the child writes: a call that passed its deadline as it happens, then the
// report.
type line struct {
	Late   *gpureceiver.LateCall `json:"late,omitempty"`
	Report *report               `json:"report,omitempty"`
}

// stderrTail is how much of the child's stderr a report keeps when the child died.
const stderrTail = 2 << 10

// check runs the reads in a child process and waits for its report until opts.Timeout, then
// kills it: a call into the driver that never returns holds only the child, whose GPU the late
// calls it reported name.
func check(opts options, stderr io.Writer) *report {
	started := time.Now()
	rep, err := runChild(opts, stderr)
	if rep == nil {
		rep = newReport(opts.NodeName, string(opts.Backend))
	}
	if err != nil {
		rep.Findings = append(rep.Findings, finding{Check: checkReads, Status: checkUnknown, Subject: "the node", Message: err.Error()})
	}
	rep.conclude(started, time.Now())
	return rep
}

// runChild returns the child's report; without one, a report of the GPUs whose calls it saw
// pass their deadline, and why there is none.
func runChild(opts options, stderr io.Writer) (*report, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this program to run its reads: %w", err)
	}
	in, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, readerArg)
	cmd.Stdin = bytes.NewReader(in)
	// The child dies with the parent (a prolog killed at its own timeout leaves no reader).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	tail := &tailBuffer{max: stderrTail}
	cmd.Stderr = tail
	if opts.Verbose {
		cmd.Stderr = io.MultiWriter(stderr, tail)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the reads: %w", err)
	}
	lines := make(chan line)
	ended, quit := make(chan error, 1), make(chan struct{})
	defer close(quit)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			select {
			case lines <- l:
			case <-quit:
				return
			}
		}
		ended <- sc.Err()
	}()
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	var late []gpureceiver.LateCall
	for {
		select {
		case l := <-lines:
			if l.Late != nil {
				late = append(late, *l.Late)
			}
			if l.Report != nil {
				stop(cmd)
				return l.Report, nil
			}
		case readErr := <-ended:
			// The child's stdout closed without a report: it exited, or crashed.
			exit := waitAtMost(cmd, time.Second)
			if exit == nil {
				exit = readErr
			}
			return hungReport(opts, late), fmt.Errorf("the reads ended without a report (%w)%s", exit, tail.String())
		case <-deadline.C:
			stop(cmd)
			return hungReport(opts, late), fmt.Errorf("the reads did not finish within -timeout %s and were killed (pid %d)", opts.Timeout, cmd.Process.Pid)
		}
	}
}

// hungReport is the report of a child that gave none: the GPUs whose calls passed their deadline
// are hung, which calls for a reboot as the connector's driver_hang does.
func hungReport(opts options, late []gpureceiver.LateCall) *report {
	rep := newReport(opts.NodeName, string(opts.Backend))
	seen := map[int]bool{}
	for _, c := range late {
		if seen[c.GPU] {
			continue
		}
		seen[c.GPU] = true
		if c.GPU < 0 {
			rep.Findings = append(rep.Findings, finding{Check: checkBackend, Status: checkUnknown, Subject: "the node", Message: fmt.Sprintf("NVML's %s did not return within -call-timeout %s", c.Call, opts.CallTimeout)})
			continue
		}
		rep.Findings = append(rep.Findings, hungFinding(c.GPU, c.UUID, c.Call, opts.CallTimeout))
	}
	for _, c := range checks {
		status := checkUnknown
		if c.name == checkGPUHealth && len(seen) > 0 && !seen[-1] {
			status = checkFail
		}
		rep.Checks = append(rep.Checks, checkReport{Name: c.name, Status: status, Detail: "the reads gave no report"})
	}
	return rep
}

// stop kills the child and reaps it if it dies at once: a child stuck in the driver (state D)
// dies only when its call returns, and is left to init.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = waitAtMost(cmd, time.Second)
}

func waitAtMost(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("pid %d has not exited", cmd.Process.Pid)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

// String is the tail as the end of an error message, or "".
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return ": " + s
}
