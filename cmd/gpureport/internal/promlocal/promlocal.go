// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package promlocal runs a private Prometheus server on loopback over data backfilled from an
// OpenMetrics file with promtool: the demo report and the report's tests query it.
package promlocal // import "github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/promlocal"

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
)

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base address, for the HTTP API.
	URL     string
	dataDir string
	flags   []string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     bytes.Buffer
}

// Backfill turns an OpenMetrics file into TSDB blocks under dataDir.
func Backfill(ctx context.Context, openMetrics, dataDir string) error {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return fmt.Errorf("promtool not found (Debian package prometheus; make deps): %w", err)
	}
	out, err := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics",
		"--max-block-duration=24h", openMetrics, dataDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("promtool tsdb create-blocks-from openmetrics: %w\n%s", err, out)
	}
	return nil
}

// Start runs Prometheus on a free loopback port over dataDir, without scrape targets, and waits
// until it is ready (at most the context's deadline or a minute). The server is $PROMETHEUS_BIN
// when set (`make e2e` sets Prometheus 3 of test/prometheus/build.sh, so the report's tests run on
// it), else the prometheus on PATH. flags are more of its command-line flags.
func Start(ctx context.Context, dataDir string, flags ...string) (*Server, error) {
	cfg := filepath.Join(dataDir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o600); err != nil {
		return nil, err
	}
	return start(ctx, dataDir, flags)
}

func start(ctx context.Context, dataDir string, flags []string) (*Server, error) {
	bin := os.Getenv("PROMETHEUS_BIN")
	if bin == "" {
		var err error
		bin, err = exec.LookPath("prometheus")
		if err != nil {
			return nil, fmt.Errorf("prometheus not found (Debian package prometheus; make deps): %w", err)
		}
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), dataDir: dataDir, flags: flags, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{ //nolint:gosec // G702: runs the Prometheus the user named in PROMETHEUS_BIN, as it is meant to
		"--config.file=" + filepath.Join(dataDir, "prometheus.yml"),
		"--storage.tsdb.path=" + dataDir,
		// Retention counts back from the newest block, so backfilled history stays.
		"--storage.tsdb.retention.time=100y",
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
	}, flags...)...)
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", http.NoBody)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("prometheus exited before it was ready:\n%s", s.log.String())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("prometheus not ready at %s: %w\n%s", s.URL, ctx.Err(), s.log.String())
		case <-tick.C:
		}
	}
}

// Stop ends the server and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}
