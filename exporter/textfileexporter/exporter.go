// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package textfileexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter"

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"
)

// maxSocketPath is what a unix socket's address may hold on Linux (sun_path, with its NUL).
const maxSocketPath = 107

type textfileExporter struct {
	cfg    *Config
	logger *zap.Logger
	// path is the file node_exporter reads; socket is where the prometheus exporter serves.
	path, socket string
	// prometheus renders the page: the prometheus_page exporter, whose names and labels are
	// the contrib prometheus exporter's (its oracle test).
	prometheus exporter.Metrics
	client     *http.Client

	mu       sync.Mutex // one write at a time
	stop     chan struct{}
	finished sync.WaitGroup
}

func newTextfileExporter(cfg *Config, set exporter.Settings) (*textfileExporter, error) {
	e := &textfileExporter{
		cfg:    cfg,
		logger: set.Logger,
		path:   filepath.Join(cfg.Directory, cfg.Filename),
		socket: filepath.Join(cfg.Directory, "."+cfg.Filename+".sock"),
		stop:   make(chan struct{}),
	}
	if len(e.socket) > maxSocketPath {
		return nil, fmt.Errorf("directory %q is too long for the unix socket the exporter serves on (%d bytes at most for %s)", cfg.Directory, maxSocketPath, e.socket)
	}
	pcfg, err := cfg.prometheusConfig(e.socket)
	if err != nil {
		return nil, err
	}
	factory := prometheuspageexporter.NewFactory()
	inner := set
	inner.ID = component.NewIDWithName(factory.Type(), "textfile")
	// This exporter reports what it sends; the inner one would count the same points again.
	inner.MeterProvider = noop.NewMeterProvider()
	if e.prometheus, err = factory.CreateMetrics(context.Background(), inner, pcfg); err != nil {
		return nil, err
	}
	e.client = &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.socket)
		}},
	}
	return e, nil
}

func (e *textfileExporter) start(ctx context.Context, host component.Host) error {
	// A socket left by a collector that was killed would make the listener fail.
	if fi, err := os.Lstat(e.socket); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(e.socket)
	}
	if err := e.prometheus.Start(ctx, host); err != nil {
		return fmt.Errorf("serving the page to write on %s: %w", e.socket, err)
	}
	e.finished.Add(1)
	go e.rewrite() //nolint:gosec // G118: the loop outlives Start, whose context ends when Start returns; shutdown stops it (e.stop)
	return nil
}

// rewrite writes the file every write_interval, so that series expire from it without new data.
func (e *textfileExporter) rewrite() {
	defer e.finished.Done()
	tick := time.NewTicker(e.cfg.WriteInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			if err := e.write(context.Background()); err != nil {
				e.logger.Warn("Writing the textfile failed; node_exporter keeps serving the previous one", zap.String("path", e.path), zap.Error(err))
			}
		}
	}
}

func (e *textfileExporter) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if err := e.prometheus.ConsumeMetrics(ctx, md); err != nil {
		return err
	}
	return e.write(ctx)
}

// write replaces the file with what the prometheus exporter serves now: a temporary file in
// the same directory (a name node_exporter ignores), synced, then renamed over the old one, so
// a reader sees the old file or the new one, never a part.
func (e *textfileExporter) write(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	families, err := e.gather(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(e.cfg.Directory, "."+e.cfg.Filename+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone already once renamed
	w := bufio.NewWriter(tmp)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	names := make([]string, 0, len(families))
	for name := range families {
		if !e.excluded(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err = enc.Encode(families[name]); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	return os.Rename(tmp.Name(), e.path)
}

func (e *textfileExporter) excluded(name string) bool {
	for _, p := range e.cfg.ExcludeMetrics {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (e *textfileExporter) gather(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://textfile/metrics", http.NoBody)
	if err != nil {
		return nil, err
	}
	// The classic text format, as node_exporter's textfile collector parses it.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the prometheus exporter answered %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func (e *textfileExporter) shutdown(ctx context.Context) error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	e.finished.Wait()
	err := e.prometheus.Shutdown(ctx)
	// Data that is no longer current must not be served as if it were.
	if rerr := os.Remove(e.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
