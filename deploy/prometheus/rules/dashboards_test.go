// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

var (
	// quoted are PromQL's string literals (label values, regular expressions), where a colon is
	// no rule's.
	quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	// recordedName is a name of the recording rules' level:metric:operations form.
	recordedName = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*[a-zA-Z0-9_]\b`)
)

// TestDashboardsReadRecordedSeries: every recording-rule series a query of deploy/grafana's
// dashboards reads is recorded by a rule of this directory, so a renamed or removed rule cannot
// leave a panel empty. (test/e2e's TestDashboards runs the queries on live data; rules evaluated
// every 10 minutes may not have run there yet.)
func TestDashboardsReadRecordedSeries(t *testing.T) {
	recorded := map[string]bool{}
	for _, file := range ruleFiles(t) {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		var f struct {
			Groups []struct {
				Rules []struct {
					Record string `yaml:"record"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		require.NoError(t, yaml.Unmarshal(raw, &f), file)
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					recorded[r.Record] = true
				}
			}
		}
	}
	dashboards, err := filepath.Glob(filepath.Join("..", "..", "grafana", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, dashboards)
	read := 0
	for _, file := range dashboards {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		require.NoError(t, json.Unmarshal(raw, &d), file)
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				for _, name := range recordedName.FindAllString(quoted.ReplaceAllString(target.Expr, `""`), -1) {
					read++
					assert.True(t, recorded[name], "%s, panel %q: %s is recorded by no rule of deploy/prometheus/rules", filepath.Base(file), p.Title, name)
				}
			}
		}
	}
	assert.Positive(t, read, "the dashboards read recorded series")
}
