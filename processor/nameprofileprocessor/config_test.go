// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	for name, want := range map[string]struct {
		profile Profile
		version DCGMVersion
	}{
		"":          {ProfileOpenPAI, DCGM48},
		"dcgm":      {ProfileDCGM, DCGM48},
		"dcgm-4.10": {ProfileDCGM, DCGM410},
		"semconv":   {ProfileSemconv, DCGM48},
	} {
		t.Run(component.NewIDWithName(metadata.Type, name).String(), func(t *testing.T) {
			cfg := configtest.Load[Config](t, NewFactory(), name)
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, want.profile, cfg.Profile)
			assert.Equal(t, want.version, cfg.DCGMVersion)
		})
	}
}

// TestUnquotedVersion: YAML reads dcgm_version: 4.10 in a file as the number 4.1, which the
// collector refuses at start-up, naming the key, rather than taking it for another version.
func TestUnquotedVersion(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "dcgm-unquoted").String())
	require.NoError(t, err)
	cfg := createDefaultConfig()
	err = sub.Unmarshal(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "'dcgm_version' expected type 'nameprofileprocessor.DCGMVersion', got unconvertible type 'float64'")
}

func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		profile Profile
		version DCGMVersion
		want    string
	}{
		"unknown profile":   {"prometheus", DCGM48, `profile: must be one of openpai, dcgm, semconv; got "prometheus"`},
		"empty profile":     {"", DCGM48, `profile: must be one of openpai, dcgm, semconv; got ""`},
		"case matters":      {"DCGM", DCGM48, `profile: must be one of openpai, dcgm, semconv; got "DCGM"`},
		"unknown version":   {ProfileDCGM, "4.9", `dcgm_version: must be one of 4.8, 4.10; got "4.9"`},
		"empty version":     {ProfileDCGM, "", `dcgm_version: must be one of 4.8, 4.10; got ""`},
		"version elsewhere": {ProfileSemconv, DCGM410, `dcgm_version: applies to profile dcgm only; profile is "semconv"`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Profile = tc.profile
			cfg.DCGMVersion = tc.version
			assert.EqualError(t, confmap.Validate(cfg), tc.want)
		})
	}
}
