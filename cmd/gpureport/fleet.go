// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/demo"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/promlocal"
	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"
	"github.com/otelcol-gpu/otelcol-gpu/deploy/prometheus/rules"
)

// recordFleetHealth has the demo's Prometheus record the fleet-health rules the report reads
// over the demo's data, as a Prometheus holding deploy/prometheus/rules would have while the
// week went by. It returns the server, restarted; on an error none runs.
func recordFleetHealth(ctx context.Context, srv *promlocal.Server, end time.Time) (*promlocal.Server, error) {
	groups, errs := rulefmt.Parse(rules.FleetHealth, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		srv.Stop()
		return nil, fmt.Errorf("fleet-health.yaml: %w", errors.Join(errs...))
	}
	from, to := demo.Span(end)
	srv, err := promlocal.RecordRules(ctx, srv, report.FleetRules(groups.Groups), from, to, demo.ScrapeInterval)
	if err != nil {
		return nil, fmt.Errorf("demo's fleet health: %w", err)
	}
	return srv, nil
}
