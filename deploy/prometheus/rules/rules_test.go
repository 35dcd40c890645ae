// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package rules holds the Prometheus recording and alert rules (*.yaml) and their promtool
// tests (tests/*.test.yaml); this test runs promtool on them and checks that every alert is
// tested both ways.
package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func promtool(t *testing.T) string {
	path, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is needed by this test: run `make deps` (Debian package prometheus)")
	return path
}

func ruleFiles(t *testing.T) []string {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

func testFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("tests", "*.test.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// TestPromtoolCheckRules: every rule file parses and every expression is valid PromQL.
func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), append([]string{"check", "rules"}, ruleFiles(t)...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestPromtoolTestRules runs the unit tests of the rules.
func TestPromtoolTestRules(t *testing.T) {
	out, err := exec.Command(promtool(t), append([]string{"test", "rules"}, testFiles(t)...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestEveryAlertFiresAndStaysQuiet: each alert of the rule files has a promtool test case in
// which it fires and one in which it stays quiet, and each has a severity, a summary and a
// description.
func TestEveryAlertFiresAndStaysQuiet(t *testing.T) {
	type rule struct {
		Alert       string            `yaml:"alert"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	var alerts []string
	for _, file := range ruleFiles(t) {
		var doc struct {
			Groups []struct {
				Rules []rule `yaml:"rules"`
			} `yaml:"groups"`
		}
		readYAML(t, file, &doc)
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts = append(alerts, r.Alert)
				assert.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "severity of %s", r.Alert)
				assert.NotEmpty(t, r.Annotations["summary"], "summary of %s", r.Alert)
				assert.NotEmpty(t, r.Annotations["description"], "description of %s", r.Alert)
			}
		}
	}
	require.NotEmpty(t, alerts)
	assert.Len(t, alerts, len(slices.Compact(slices.Sorted(slices.Values(alerts)))), "alert names are unique")

	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, file := range testFiles(t) {
		var doc struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		readYAML(t, file, &doc)
		for _, tc := range doc.Tests {
			for _, at := range tc.AlertRuleTest {
				if len(at.ExpAlerts) > 0 {
					fires[at.Alertname] = true
				} else {
					quiet[at.Alertname] = true
				}
			}
		}
	}
	for _, a := range alerts {
		assert.True(t, fires[a], "no test in which %s fires", a)
		assert.True(t, quiet[a], "no test in which %s stays quiet", a)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, into), path)
}
