// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package filestoragecheckextension

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
	assert.Equal(t, "/var/lib/otelcol-gpu/queue", def.Directory)
	assert.Equal(t, time.Second, def.Timeout)

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, 5*time.Second, custom.Timeout)
}

func TestConfigErrors(t *testing.T) {
	for name, want := range map[string]string{
		"no_directory": "directory must be set to the file_storage extension's directory",
		"bad_timeout":  "timeout must be positive, got 0s",
	} {
		t.Run(name, func(t *testing.T) {
			assert.EqualError(t, confmap.Validate(configtest.Load[Config](t, NewFactory(), name)), want)
		})
	}
}
