// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for id, want := range map[component.ID]string{
		component.NewID(metadata.Type):                    ProfileOpenPAI,
		component.NewIDWithName(metadata.Type, "dcgm"):    ProfileDCGM,
		component.NewIDWithName(metadata.Type, "semconv"): ProfileSemconv,
	} {
		t.Run(id.String(), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, cfg.Validate())
			assert.Equal(t, want, cfg.Profile)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ profile, want string }{
		"unknown profile": {"prometheus", `profile must be one of [openpai dcgm semconv], got "prometheus"`},
		"empty profile":   {"", `profile must be one of [openpai dcgm semconv], got ""`},
		"case matters":    {"DCGM", `profile must be one of [openpai dcgm semconv], got "DCGM"`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Profile = tc.profile
			assert.EqualError(t, cfg.Validate(), tc.want)
		})
	}
}
