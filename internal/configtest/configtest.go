// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package configtest loads a component's test configurations, as every component's
// config_test.go does: testdata/config.yaml, one entry per component ID.
package configtest // import "github.com/otelcol-gpu/otelcol-gpu/internal/configtest"

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load unmarshals the entry <typ>/<name> (<typ> when name is empty) of testdata/config.yaml
// over the factory's default configuration.
func Load[T any](t *testing.T, factory interface{ CreateDefaultConfig() component.Config }, typ component.Type, name string) *T {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := factory.CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(typ, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	out, ok := cfg.(*T)
	require.True(t, ok, "the factory's configuration is a %T", cfg)
	return out
}
