// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// The fake check is this test binary run again (TestFakeNodeCheck): it answers as the file
// named by fakeCheckMode says, and writes its arguments where fakeCheckArgs says. The real
// otelcol-gpu-check runs under the agent in test/e2e (TestNodeCheckInTheAgent).
const (
	fakeCheckMode = "GPURECEIVER_FAKE_CHECK_MODE"
	fakeCheckArgs = "GPURECEIVER_FAKE_CHECK_ARGS"
)

func TestFakeNodeCheck(*testing.T) {
	modeFile := os.Getenv(fakeCheckMode)
	if modeFile == "" {
		return // not the fake: a test of the package run
	}
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	_ = os.WriteFile(os.Getenv(fakeCheckArgs), []byte(strings.Join(args, "\n")), 0o600)
	mode, _ := os.ReadFile(modeFile)
	switch string(mode) {
	case "healthy":
		fmt.Print(`{"schema_version": 1, "status": "healthy", "exit_code": 0, "findings": []}`)
		os.Exit(nodeCheckHealthy)
	case "unhealthy":
		fmt.Print(`{"schema_version": 1, "status": "unhealthy", "exit_code": 1, "findings": [` +
			`{"check": "gpu_health", "status": "fail", "subject": "GPU 3 (GPU-3)", "action": "reset_gpu", "message": "uncorrected ECC errors"}]}`)
		os.Exit(nodeCheckUnhealthy)
	case "garbage":
		fmt.Print("Segmentation fault")
		os.Exit(nodeCheckHealthy)
	case "hang":
		fmt.Fprint(os.Stderr, "reading GPU 0")
		time.Sleep(time.Hour)
	}
	os.Exit(3)
}

// fakeChecker is a node checker running the fake check in mode, on clk, logging to an observer.
func fakeChecker(t *testing.T, mode string, clk clock.Clock) (*nodeChecker, *observer.ObservedLogs, func(mode string), string) {
	t.Helper()
	dir := t.TempDir()
	modeFile, argsFile := filepath.Join(dir, "mode"), filepath.Join(dir, "args")
	setMode := func(mode string) { require.NoError(t, os.WriteFile(modeFile, []byte(mode), 0o600)) }
	setMode(mode)
	t.Setenv(fakeCheckMode, modeFile)
	t.Setenv(fakeCheckArgs, argsFile)
	self, err := os.Executable()
	require.NoError(t, err)

	cfg := testConfig()
	cfg.NodeCheck = NodeCheckConfig{Enabled: true, Path: self, Interval: 5 * time.Minute, Timeout: 30 * time.Second, Args: []string{"-ib-ports=8"}}
	core, logs := observer.New(zap.DebugLevel)
	ss := settingsFor(cfg, nil)
	ss.clock, ss.set.Logger = clk, zap.New(core)
	c, err := newNodeChecker(ss)
	require.NoError(t, err)
	c.args = append([]string{"-test.run=^TestFakeNodeCheck$", "--"}, c.args...)
	return c, logs, setMode, argsFile
}

// latest waits for a result other than before and returns it.
func latest(t *testing.T, c *nodeChecker, before *nodeCheckResult) *nodeCheckResult {
	t.Helper()
	var r *nodeCheckResult
	poll.Until(t, 30*time.Second, "a new result of the node check", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		r = c.latest
		return r != nil && r != before
	})
	return r
}

func TestNodeCheckRunsEveryInterval(t *testing.T) {
	clk := newFakeClock()
	c, logs, setMode, argsFile := fakeChecker(t, "healthy", clk)
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), settingsFor(testConfig(), clk).set)
	now := pcommon.NewTimestampFromTime(clk.Now())
	c.emit(mb, now)
	assert.Zero(t, mb.Emit().MetricCount(), "nothing before the first run ends")

	c.start()
	t.Cleanup(c.shutdown)
	first := latest(t, c, nil)
	assert.Equal(t, nodeCheckResult{status: nodeCheckHealthy, ended: clk.Now()}, *first, "the first run at start")
	args, err := os.ReadFile(argsFile)
	require.NoError(t, err)
	assert.Equal(t, "-o json -timeout 30s -call-timeout 5s -backend auto -root-path / -node-name gpu-node-07 -kmsg=false -ib-ports=8", strings.ReplaceAll(string(args), "\n", " "),
		"the check gets the receiver's backend settings and node_check::args")

	c.emit(mb, now)
	md := mb.Emit()
	values := map[string]float64{}
	for _, m := range md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().All() {
		dp := m.Gauge().DataPoints().At(0)
		values[m.Name()] = dp.DoubleValue() + float64(dp.IntValue())
	}
	assert.Equal(t, map[string]float64{
		"gpu_node_check_status": 0, "gpu_node_check_timestamp_seconds": float64(clk.Now().Unix()), "gpu_node_check_duration_seconds": 0,
	}, values)

	// The next run comes an interval after the first ended, and its findings go to the log.
	setMode("unhealthy")
	nextWait(t, clk, 5*time.Minute)
	second := latest(t, c, first)
	assert.Equal(t, int64(nodeCheckUnhealthy), second.status)
	assert.Equal(t, first.ended.Add(5*time.Minute), second.ended)
	warned := logs.FilterMessage("The node check did not pass").All()
	require.Len(t, warned, 1)
	assert.Equal(t, zap.WarnLevel, warned[0].Level)
	assert.Equal(t, []any{"gpu_health: GPU 3 (GPU-3): uncorrected ECC errors (action: reset_gpu)"}, warned[0].ContextMap()["findings"])

	// The same verdict again is not news: logged at debug.
	nextWait(t, clk, 5*time.Minute)
	third := latest(t, c, second)
	assert.Equal(t, int64(nodeCheckUnhealthy), third.status)
	warned = logs.FilterMessage("The node check did not pass").All()
	require.Len(t, warned, 2)
	assert.Equal(t, zap.DebugLevel, warned[1].Level)
	assert.Equal(t, zap.InfoLevel, logs.FilterMessage("The node check passed").All()[0].Level, "the first verdict")
}

func TestNodeCheckCouldNotCheck(t *testing.T) {
	for _, tc := range []struct {
		mode, log string
	}{
		{"garbage", "The node check did not answer with its JSON report (schema_version 1, its exit code)"},
		{"crash", "The node check did not answer with its JSON report (schema_version 1, its exit code)"},
		{"hang", "The node check did not run to its end"},
		{"missing", "The node check did not run to its end"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			clk := newFakeClock()
			c, logs, _, _ := fakeChecker(t, tc.mode, clk)
			if tc.mode == "hang" {
				// A real deadline, whatever it finds: the fake hangs for an hour, a slow start
				// ends the same way.
				c.killAfter = 500 * time.Millisecond
			}
			if tc.mode == "missing" {
				c.path = filepath.Join(t.TempDir(), "otelcol-gpu-check")
			}
			c.start()
			t.Cleanup(c.shutdown)
			assert.Equal(t, int64(nodeCheckCouldNotCheck), latest(t, c, nil).status)
			assert.Equal(t, 1, logs.FilterMessage(tc.log).Len(), "%v", logs.All())
		})
	}
}

// A run in flight when the receiver stops is killed, and leaves no result.
func TestNodeCheckShutdownKillsTheRun(t *testing.T) {
	clk := newFakeClock()
	c, logs, _, argsFile := fakeChecker(t, "hang", clk)
	c.start()
	poll.Until(t, 30*time.Second, "the check started", func() bool {
		_, err := os.Stat(argsFile)
		return err == nil
	})
	waitOrFail(t, c.shutdown, "shutdown did not kill the hung check")
	assert.Nil(t, c.latest)
	assert.Zero(t, logs.Len(), "a run killed by shutdown is not the node's fault: %v", logs.All())
}
