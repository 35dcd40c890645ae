// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package promlocal

import (
	"log/slog"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/prometheus/rules"
)

func records(pass []rulefmt.RuleGroup) map[string][]string {
	out := map[string][]string{}
	for _, g := range pass {
		for _, r := range g.Rules {
			out[g.Name+"@"+g.Interval.String()] = append(out[g.Name+"@"+g.Interval.String()], r.Record)
		}
	}
	return out
}

// TestRuleLayersOfFleetHealth: each rule is evaluated after the rules whose series it reads,
// including one read through a __name__ regular expression, in its own group and interval.
func TestRuleLayersOfFleetHealth(t *testing.T) {
	groups, errs := rulefmt.Parse(rules.FleetHealth, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	layers, err := ruleLayers(groups.Groups)
	require.NoError(t, err)
	require.Len(t, layers, 3)
	assert.Equal(t, map[string][]string{
		"fleet-health-state@1m": {
			"node:gpu_node_unhealthy:bool", "node:gpu_node_quarantined:bool", "node:gpu_node_validation_pending:bool",
			"node:gpu_node_quarantined_by_action:bool", "gpu:gpu_healthy:bool",
		},
		"fleet-health-week@10m": {"node:gpu_node_faults:increase1w", "gpu:gpu_faults:increase1w"},
	}, records(layers[0]))
	assert.Equal(t, map[string][]string{
		"fleet-health-state@1m": {"node:gpu_node_out_of_service:bool"},
		"fleet-health-week@10m": {
			"node:gpu_node_unhealthy_seconds:sum1w", "node:gpu_node_quarantined_seconds:sum1w",
			"node:gpu_node_validation_pending_seconds:sum1w", "node:gpu_node_quarantined_seconds_by_action:sum1w",
			"gpu:gpu_availability:ratio1w",
		},
	}, records(layers[1]))
	assert.Equal(t, map[string][]string{
		"fleet-health-week@10m": {
			"node:gpu_availability:ratio1w", "node:gpu_time_to_repair_seconds:mean1w", "node:gpu_time_between_faults_seconds:mean1w",
		},
	}, records(layers[2]))
}

func TestRuleLayersRefuseACycle(t *testing.T) {
	_, err := ruleLayers([]rulefmt.RuleGroup{{Name: "g", Rules: []rulefmt.Rule{
		{Record: "a:x:y", Expr: "b:x:y + 1"},
		{Record: "b:x:y", Expr: "a:x:y"},
	}}})
	require.EqualError(t, err, "recording rules read each other in a cycle")
}
