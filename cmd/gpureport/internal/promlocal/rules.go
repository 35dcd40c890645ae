// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package promlocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// RecordRules evaluates the recording rules of groups over [from, to] on the server's data, as
// a Prometheus holding those rules would have while the data came in, and adds what they record
// to the data (`promtool tsdb create-blocks-from rules`, then a restart over the new blocks). It
// returns the restarted server; s is stopped, and on an error no server runs.
//
// promtool evaluates each rule on what the server has stored, so a rule that reads what another
// records is evaluated in a later pass, once that one's blocks are in (ruleLayers). lookback is
// the server's lookback delta from now on: backfilled data has no staleness markers, so a series
// that ends would be read on for Prometheus's default five minutes; the data's scrape interval
// ends it where a scraping Prometheus's staleness marker would.
func RecordRules(ctx context.Context, s *Server, groups []rulefmt.RuleGroup, from, to time.Time, lookback time.Duration) (*Server, error) {
	layers, err := ruleLayers(groups)
	if err != nil {
		s.Stop()
		return nil, err
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("promtool not found (Debian package prometheus; make deps): %w", err)
	}
	flags := append(slices.Clone(s.flags), "--query.lookback-delta="+model.Duration(lookback).String())
	restart := func(s *Server) (*Server, error) {
		s.Stop()
		return start(ctx, s.dataDir, flags)
	}
	if s, err = restart(s); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "promlocal-rules-")
	if err != nil {
		s.Stop()
		return nil, err
	}
	defer os.RemoveAll(work)
	for i, layer := range layers {
		err := recordLayer(ctx, promtool, s.URL, layer, from, to, filepath.Join(work, fmt.Sprint(i)), s.dataDir)
		if err == nil {
			s, err = restart(s)
		}
		if err != nil {
			if s != nil {
				s.Stop()
			}
			return nil, fmt.Errorf("recording rules, pass %d of %d: %w", i+1, len(layers), err)
		}
	}
	return s, nil
}

// recordLayer writes one pass's rules into dir, has promtool evaluate them against url into
// blocks there, and moves the blocks into dataDir (the server picks them up on its restart).
func recordLayer(ctx context.Context, promtool, url string, groups []rulefmt.RuleGroup, start, end time.Time, dir, dataDir string) error {
	out := filepath.Join(dir, "blocks")
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	content, marshalErr := yaml.Marshal(rulefmt.RuleGroups{Groups: groups})
	if marshalErr != nil {
		return marshalErr
	}
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, content, 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "rules", "--quiet", //nolint:gosec // G204: promtool from PATH, our own arguments
		"--url="+url, "--start="+start.UTC().Format(time.RFC3339), "--end="+end.UTC().Format(time.RFC3339),
		"--output-dir="+out, file)
	if msg, cmdErr := cmd.CombinedOutput(); cmdErr != nil {
		return fmt.Errorf("promtool tsdb create-blocks-from rules: %w\n%s", cmdErr, msg)
	}
	blocks, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range blocks {
		errs = append(errs, os.Rename(filepath.Join(out, b.Name()), filepath.Join(dataDir, b.Name())))
	}
	return errors.Join(errs...)
}

// ruleLayers orders the recording rules of groups into passes: a rule goes into the pass after
// the last one recording a series it selects (by the selectors' metric name matchers), each pass
// keeping the rules' groups and their intervals. Alerting rules are left out.
func ruleLayers(groups []rulefmt.RuleGroup) ([][]rulefmt.RuleGroup, error) {
	type ruleRef struct{ group, rule int }
	p := parser.NewParser(parser.Options{})
	recorded := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	deps := map[ruleRef][]string{}
	for gi, g := range groups {
		for ri, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			e, err := p.ParseExpr(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("rule %s of group %s: %w", r.Record, g.Name, err)
			}
			ref := ruleRef{gi, ri}
			deps[ref] = []string{} // recorded, even when it reads nothing recorded
			for _, sel := range parser.ExtractSelectors(e) {
				for name := range recorded {
					if selects(sel, name) {
						deps[ref] = append(deps[ref], name)
					}
				}
			}
		}
	}
	// Longest path from a rule that reads only stored series; more rounds than rules is a cycle.
	layer := map[ruleRef]int{}
	layerOf := map[string]int{}
	for round := 0; ; round++ {
		if round > len(deps) {
			return nil, errors.New("recording rules read each other in a cycle")
		}
		changed := false
		for ref, names := range deps {
			l := 0
			for _, name := range names {
				l = max(l, layerOf[name]+1)
			}
			if l != layer[ref] {
				layer[ref], changed = l, true
			}
			record := groups[ref.group].Rules[ref.rule].Record
			if l > layerOf[record] {
				layerOf[record], changed = l, true
			}
		}
		if !changed {
			break
		}
	}
	var out [][]rulefmt.RuleGroup
	for l := 0; ; l++ {
		var pass []rulefmt.RuleGroup
		for gi, g := range groups {
			kept := g
			kept.Rules = nil
			for ri, r := range g.Rules {
				if ref := (ruleRef{gi, ri}); r.Record != "" && layer[ref] == l {
					kept.Rules = append(kept.Rules, r)
				}
			}
			if len(kept.Rules) > 0 {
				pass = append(pass, kept)
			}
		}
		if len(pass) == 0 {
			return out, nil
		}
		out = append(out, pass)
	}
}

// selects says whether a selector's metric name matchers take name (one without any takes all).
func selects(sel []*labels.Matcher, name string) bool {
	for _, m := range sel {
		if m.Name == model.MetricNameLabel && !m.Matches(name) {
			return false
		}
	}
	return true
}
