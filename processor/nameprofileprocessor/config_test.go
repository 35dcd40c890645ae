// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	for name, want := range map[string]Profile{"": ProfileOpenPAI, "dcgm": ProfileDCGM, "semconv": ProfileSemconv} {
		t.Run(component.NewIDWithName(metadata.Type, name).String(), func(t *testing.T) {
			cfg := configtest.Load[Config](t, NewFactory(), name)
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, want, cfg.Profile)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		profile Profile
		want    string
	}{
		"unknown profile": {"prometheus", `profile: must be one of openpai, dcgm, semconv; got "prometheus"`},
		"empty profile":   {"", `profile: must be one of openpai, dcgm, semconv; got ""`},
		"case matters":    {"DCGM", `profile: must be one of openpai, dcgm, semconv; got "DCGM"`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Profile = tc.profile
			assert.EqualError(t, confmap.Validate(cfg), tc.want)
		})
	}
}
