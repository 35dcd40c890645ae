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

// Load unmarshals the entry <type>/<name> (<type> when name is empty) of testdata/config.yaml
// over the factory's default configuration, as the collector does.
func Load[T any](tb testing.TB, factory component.Factory, name string) *T {
	tb.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(tb, err)
	cfg := factory.CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(factory.Type(), name).String())
	require.NoError(tb, err)
	require.NoError(tb, sub.Unmarshal(cfg))
	out, ok := cfg.(*T)
	require.True(tb, ok, "the factory's configuration is a %T", cfg)
	return out
}
