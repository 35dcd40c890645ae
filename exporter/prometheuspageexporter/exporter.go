// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// contentType is the text format's, with the escaping of its names: underscores when the
// translation escapes them, as promhttp announces it; none when names may be UTF-8 (promhttp
// would escape them for a scraper that asks; this page has one form).
func contentType(cfg *Config) string {
	scheme := model.UnderscoreEscaping
	if !cfg.strategy().ShouldEscape() {
		scheme = model.NoEscaping
	}
	return string(expfmt.FmtText) + "; " + model.EscapingKey + "=" + scheme.String()
}

// sweepInterval is how often the exporter looks for expired series.
const sweepInterval = 5 * time.Second

type pageExporter struct {
	cfg      *Config
	settings component.TelemetrySettings
	logger   *zap.Logger
	clock    clock.Clock
	page     *page
	// contentType is the page's Content-Type.
	contentType string

	server *http.Server
	stop   chan struct{}
	done   sync.WaitGroup
}

func newPageExporter(cfg *Config, set exporter.Settings, clk clock.Clock) (*pageExporter, error) {
	p, err := newPage(cfg, set.Logger)
	if err != nil {
		return nil, err
	}
	return &pageExporter{cfg: cfg, settings: set.TelemetrySettings, logger: set.Logger, clock: clk, page: p, contentType: contentType(cfg)}, nil
}

func (e *pageExporter) consumeMetrics(_ context.Context, md pmetric.Metrics) error {
	e.page.consume(md, e.clock.Now())
	return nil
}

func (e *pageExporter) start(ctx context.Context, host component.Host) error {
	ln, err := e.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", e.serveScrape)
	e.server, err = e.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), e.settings, mux)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	e.stop = make(chan struct{})
	// Series expire by arrival time even when nobody scrapes and nothing arrives. A sweep with
	// nothing due compares two times, so it runs often: a series leaves at most
	// sweepInterval after it expired.
	ticker := e.clock.NewTicker(min(e.cfg.MetricExpiration, sweepInterval))
	e.done.Add(2)
	go func() {
		defer e.done.Done()
		if err := e.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			e.logger.Error("the scrape endpoint stopped", zap.Error(err))
		}
	}()
	go func() {
		defer e.done.Done()
		defer ticker.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-ticker.C():
				e.page.expire(e.clock.Now())
			}
		}
	}()
	return nil
}

func (e *pageExporter) shutdown(ctx context.Context) error {
	if e.server == nil {
		return nil
	}
	err := e.server.Shutdown(ctx)
	close(e.stop)
	e.done.Wait()
	return err
}

// serveScrape writes the page the last batches made; gzip when the scraper takes it.
func (e *pageExporter) serveScrape(w http.ResponseWriter, r *http.Request) {
	v := e.page.viewAt(e.clock.Now())
	h := w.Header()
	h.Set("Content-Type", e.contentType)
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.Itoa(v.deflatedSize))
		_ = v.writeGzip(w) // a scraper that hung up is no error of ours
		return
	}
	h.Set("Content-Length", strconv.Itoa(v.size))
	_ = v.writeText(w)
}

// acceptsGzip reads Accept-Encoding: gzip listed and not refused with q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		enc, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(enc) != "gzip" {
			continue
		}
		name, q, found := strings.Cut(strings.TrimSpace(params), "=")
		if !found || strings.TrimSpace(name) != "q" {
			return true
		}
		weight, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
		return err != nil || weight > 0
	}
	return false
}
