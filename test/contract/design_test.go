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

// codeList writes names as the design's table does: `a`, `b`; none as —.
func codeList(names []string) string {
	if len(names) == 0 {
		return "—"
	}
	return "`" + strings.Join(names, "`, `") + "`"
}
