// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// NodeCheckConfig runs otelcol-gpu-check (docs/check.md) on the node every Interval, with the
// receiver's own backend settings, and reports its verdict (gpu_node_check_*): the
// k8s_gpu_health connector's validation gate waits for a passing one.
type NodeCheckConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Path is the check's binary; empty: otelcol-gpu-check beside the collector's own binary
	// (the image's /otelcol-gpu-check, the .deb's /usr/bin/otelcol-gpu-check).
	Path string `mapstructure:"path"`
	// Interval is the time between the end of one run and the start of the next; the first
	// runs at start.
	Interval time.Duration `mapstructure:"interval"`
	// Timeout is the check's -timeout: the longest one run takes.
	Timeout time.Duration `mapstructure:"timeout"`
	// Args are more of the check's flags (-nvlinks, -driver-version, -xid-classes, -ib-ports,
	// -ib-rate-gbps); the receiver sets the others from its own keys.
	Args []string `mapstructure:"args"`
}

// nodeCheckOwnFlags are the check's flags the receiver sets from its configuration.
var nodeCheckOwnFlags = []string{"-o", "-timeout", "-call-timeout", "-backend", "-library-path", "-scenario", "-root-path", "-kmsg", "-kmsg-path", "-node-name", "-gpus", "-v"}

func (c *NodeCheckConfig) validate(callTimeout time.Duration) []error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.Path != "" && !filepath.IsAbs(c.Path) {
		errs = append(errs, fmt.Errorf("node_check::path must be an absolute path, got %q", c.Path))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("node_check::interval must be positive, got %s", c.Interval))
	}
	if c.Timeout <= callTimeout {
		errs = append(errs, fmt.Errorf("node_check::timeout must be longer than call_timeout (%s): a hung GPU is found when its call passes call_timeout, got %s", callTimeout, c.Timeout))
	}
	for _, arg := range c.Args {
		name, _, _ := strings.Cut(arg, "=")
		switch {
		case !strings.HasPrefix(arg, "-"):
			errs = append(errs, fmt.Errorf("node_check::args: %q is not a flag: give each as -name=value", arg))
		case slices.Contains(nodeCheckOwnFlags, strings.Replace(name, "--", "-", 1)):
			errs = append(errs, fmt.Errorf("node_check::args: %s is set from the receiver's own keys (backend, library_path, scenario, root_path, xid::kmsg, xid::kmsg_path, node_name, call_timeout, configured_gpu_count, node_check::timeout); remove it", name))
		}
	}
	return errs
}

// nodeCheckArgs are the check's flags: the receiver's backend settings, then node_check::args.
func (cfg *Config) nodeCheckArgs(nodeName string) []string {
	args := []string{
		"-o", "json", "-timeout", cfg.NodeCheck.Timeout.String(), "-call-timeout", cfg.CallTimeout.String(),
		"-backend", string(cfg.Backend), "-root-path", cfg.RootPath, "-node-name", nodeName,
	}
	kmsgPath := cfg.XID.KmsgPath
	if !cfg.XID.Kmsg {
		// The receiver does not read the kernel log (a container that cannot open it): nor
		// does the check, which would otherwise say it could not check.
		args, kmsgPath = append(args, "-kmsg=false"), ""
	}
	for _, flag := range [][2]string{{"-library-path", cfg.LibraryPath}, {"-scenario", cfg.Scenario}, {"-kmsg-path", kmsgPath}} {
		if flag[1] != "" {
			args = append(args, flag[0], flag[1])
		}
	}
	if cfg.ConfiguredGPUCount != nil {
		args = append(args, "-gpus", strconv.Itoa(*cfg.ConfiguredGPUCount))
	}
	return append(args, cfg.NodeCheck.Args...)
}

// Exit codes of otelcol-gpu-check, and gpu_node_check_status's values.
const (
	nodeCheckHealthy       = 0
	nodeCheckUnhealthy     = 1
	nodeCheckCouldNotCheck = 2
)

// killGrace is how long past its own -timeout the check may take before the receiver kills it:
// it bounds itself, this is for a check that does not.
const killGrace = 10 * time.Second

// nodeCheckResult is the newest run's outcome.
type nodeCheckResult struct {
	status   int64
	ended    time.Time
	duration time.Duration
}

// nodeChecker runs the check in the background and keeps its newest result for the scrape.
type nodeChecker struct {
	path string
	args []string
	cfg  NodeCheckConfig
	// killAfter bounds a run: the check's own -timeout, and killGrace.
	killAfter time.Duration
	clock     clock.Clock
	logger    *zap.Logger

	mu     sync.Mutex
	latest *nodeCheckResult
	// verdict is the newest report's status and findings, as logged; only the loop uses it.
	verdict string

	cancel context.CancelFunc
	done   chan struct{}
}

func newNodeChecker(ss scraperSettings) (*nodeChecker, error) {
	path := ss.cfg.NodeCheck.Path
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("node_check: finding otelcol-gpu-check beside this binary: %w; set node_check::path", err)
		}
		path = filepath.Join(filepath.Dir(self), "otelcol-gpu-check")
	}
	return &nodeChecker{
		path: path, args: ss.cfg.nodeCheckArgs(ss.nodeName), cfg: ss.cfg.NodeCheck,
		killAfter: ss.cfg.NodeCheck.Timeout + killGrace, clock: ss.clock, logger: ss.set.Logger.With(zap.String("node_check", path)),
	}, nil
}

// start runs the check now, then Interval after each run ends, until shutdown.
func (c *nodeChecker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		for {
			result := c.run(ctx)
			if ctx.Err() != nil {
				return // shut down: the run was killed, not the node's fault
			}
			c.record(result)
			if !clock.Sleep(c.clock, c.cfg.Interval, ctx.Done()) {
				return
			}
		}
	}()
}

// shutdown kills a run in flight and waits for the loop to end.
func (c *nodeChecker) shutdown() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
}

func (c *nodeChecker) record(r nodeCheckResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest = &r
}

// emit records the newest result at now, if the check has run.
func (c *nodeChecker) emit(mb *metadata.MetricsBuilder, now pcommon.Timestamp) {
	c.mu.Lock()
	r := c.latest
	c.mu.Unlock()
	if r == nil {
		return
	}
	mb.RecordGpuNodeCheckStatusDataPoint(now, r.status)
	mb.RecordGpuNodeCheckTimestampSecondsDataPoint(now, float64(r.ended.UnixNano())/1e9)
	mb.RecordGpuNodeCheckDurationSecondsDataPoint(now, r.duration.Seconds())
}

// checkReport is what the receiver reads of the check's JSON report (docs/check.md).
type checkReport struct {
	SchemaVersion int    `json:"schema_version"`
	Status        string `json:"status"`
	ExitCode      int    `json:"exit_code"`
	Findings      []struct {
		Check, Subject, Action, Message string
	} `json:"findings"`
}

// run runs the check once; a check that cannot run, is killed or answers something else than
// its report is "could not check", with the reason in the log.
func (c *nodeChecker) run(parent context.Context) nodeCheckResult {
	started := c.clock.Now()
	ctx, cancel := context.WithTimeout(parent, c.killAfter)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, c.args...) //nolint:gosec // G204: the operator's node_check::path and args
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second // a grandchild holding the pipes does not hold the receiver
	err := cmd.Run()
	result := nodeCheckResult{status: nodeCheckCouldNotCheck, ended: c.clock.Now()}
	result.duration = result.ended.Sub(started)

	var exit *exec.ExitError
	if parent.Err() != nil {
		return result
	}
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		c.logger.Error("The node check did not run to its end", zap.Error(errors.Join(err, ctx.Err())), zap.String("stderr", lastLines(stderr.String(), 5)))
		return result
	}
	var rep checkReport
	if jsonErr := json.Unmarshal(stdout.Bytes(), &rep); jsonErr != nil || rep.SchemaVersion != 1 || rep.ExitCode != cmd.ProcessState.ExitCode() {
		c.logger.Error("The node check did not answer with its JSON report (schema_version 1, its exit code)",
			zap.Int("exit_code", cmd.ProcessState.ExitCode()), zap.NamedError("decode", jsonErr), zap.String("stderr", lastLines(stderr.String(), 5)))
		return result
	}
	result.status = int64(rep.ExitCode)
	findings := make([]string, len(rep.Findings))
	for i, f := range rep.Findings {
		findings[i] = fmt.Sprintf("%s: %s: %s", f.Check, f.Subject, f.Message)
		if f.Action != "" {
			findings[i] += " (action: " + f.Action + ")"
		}
	}
	// A verdict is logged when it changes: a node without a GPU driver would otherwise say the
	// same every interval.
	verdict := rep.Status + "\n" + strings.Join(findings, "\n")
	level := zap.DebugLevel
	if verdict != c.verdict {
		level = zap.InfoLevel
		if rep.ExitCode != nodeCheckHealthy {
			level = zap.WarnLevel
		}
	}
	c.verdict = verdict
	if rep.ExitCode == nodeCheckHealthy {
		c.logger.Log(level, "The node check passed")
	} else {
		c.logger.Log(level, "The node check did not pass", zap.String("status", rep.Status), zap.Strings("findings", findings))
	}
	return result
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
