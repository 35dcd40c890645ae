// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package textfileexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	require.NoError(t, confmap.Validate(def))
	assert.Equal(t, "otelcol-gpu.prom", def.Filename)
	assert.Equal(t, 15*time.Second, def.WriteInterval)
	assert.Equal(t, []string{"node_*"}, def.ExcludeMetrics)
	assert.Equal(t, 5*time.Minute, def.MetricExpiration, "the prometheus exporter's default")

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, "gpu.prom", custom.Filename)
	assert.Equal(t, time.Minute, custom.WriteInterval)
	assert.Equal(t, "UnderscoreEscapingWithoutSuffixes", custom.TranslationStrategy)
	assert.True(t, custom.WithoutScopeInfo)
	assert.Equal(t, []string{"*"}, custom.ResourceConstantLabels.Included)
	assert.Equal(t, 2*time.Minute, custom.MetricExpiration)
}

func TestConfigErrors(t *testing.T) {
	for name, want := range map[string]string{
		"no_directory":      "directory must be set",
		"missing_directory": `directory "testdata/missing" is not a directory`,
		"bad_filename":      `filename must end in .prom (node_exporter reads no other file), got "gpu.txt"`,
		"path_in_filename":  `filename must be a plain file name in directory, got "../gpu.prom"`,
		"hidden_filename":   `filename must be a plain file name in directory, got ".gpu.prom"`,
		"bad_interval":      "write_interval must be positive, got 0s",
		"bad_strategy":      `translation_strategy "Sideways" is not one of`,
		"bad_exclude":       `exclude_metrics: bad pattern "["`,
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorContains(t, confmap.Validate(configtest.Load[Config](t, NewFactory(), name)), want)
		})
	}
}
