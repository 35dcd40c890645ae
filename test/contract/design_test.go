// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package contract

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestDesignPipelines: docs/design.md's table of pipelines has one row per pipeline of the
// agent's and the gateway's shipped configurations, with their receivers, processors and
// exporters in order.
func TestDesignPipelines(t *testing.T) {
	t.Chdir(root)
	design, err := os.ReadFile(filepath.Join("docs", "design.md"))
	require.NoError(t, err)
	var want, got []string
	for _, config := range []string{"agent.yaml", "gateway.yaml"} {
		data, err := os.ReadFile(filepath.Join("distro", config))
		require.NoError(t, err)
		var shipped struct {
			Service struct {
				Pipelines map[string]struct {
					Receivers, Processors, Exporters []string
				}
			}
		}
		require.NoError(t, yaml.Unmarshal(data, &shipped), config)
		require.NotEmpty(t, shipped.Service.Pipelines, config)
		for name, p := range shipped.Service.Pipelines {
			want = append(want, fmt.Sprintf("| %#q | %#q | %s | %s | %s |", config, name, codeList(p.Receivers), codeList(p.Processors), codeList(p.Exporters)))
		}
		for line := range strings.Lines(string(design)) {
			if strings.HasPrefix(line, "| `"+config+"` |") {
				got = append(got, strings.TrimSpace(line))
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got, "docs/design.md's pipeline rows and distro/'s pipelines differ: update the table (and the diagram above it)")
}

// TestPrometheusOTLPLabels holds deploy/prometheus/otlp.yaml's ignored resource attributes to the
// gateway's prometheus exporter's exclusions (distro/gateway.yaml): the scrape of its page and
// Prometheus 3's OTLP receiver must make the same labels of the same data.
func TestPrometheusOTLPLabels(t *testing.T) {
	t.Chdir(root)
	var prometheus struct {
		OTLP struct {
			PromoteAll bool     `yaml:"promote_all_resource_attributes"`
			Ignore     []string `yaml:"ignore_resource_attributes"`
		} `yaml:"otlp"`
	}
	data, err := os.ReadFile(filepath.Join("deploy", "prometheus", "otlp.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &prometheus))
	var gateway struct {
		Exporters map[string]struct {
			Labels struct {
				Included []string `yaml:"included"`
				Excluded []string `yaml:"excluded"`
			} `yaml:"resource_constant_labels"`
		} `yaml:"exporters"`
	}
	data, err = os.ReadFile(filepath.Join("distro", "gateway.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &gateway))
	page := gateway.Exporters["prometheus_page"].Labels
	require.Equal(t, []string{"*"}, page.Included, "the page makes every resource attribute a label")
	assert.True(t, prometheus.OTLP.PromoteAll, "so must Prometheus")
	assert.ElementsMatch(t, page.Excluded, prometheus.OTLP.Ignore, "but those the page excludes")
}

// codeList writes names as the design's table does: `a`, `b`; none as —.
func codeList(names []string) string {
	if len(names) == 0 {
		return "—"
	}
	return "`" + strings.Join(names, "`, `") + "`"
}
