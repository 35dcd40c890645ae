// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import (
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/resourcetotelemetry"
	"github.com/prometheus/otlptranslator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	require.NoError(t, confmap.Validate(def))
	assert.Equal(t, "0.0.0.0:9102", def.ServerConfig.NetAddr.Endpoint)
	assert.Equal(t, 5*time.Minute, def.MetricExpiration, "the contrib exporter's default")
	assert.Equal(t, otlptranslator.UnderscoreEscapingWithSuffixes, def.strategy(), "the contrib exporter's default")
	assert.False(t, def.WithoutScopeInfo)

	agent := configtest.Load[Config](t, NewFactory(), "agent")
	require.NoError(t, confmap.Validate(agent))
	assert.Equal(t, otlptranslator.UnderscoreEscapingWithoutSuffixes, agent.strategy())
	assert.True(t, agent.WithoutScopeInfo)
	assert.Equal(t, []string{"*"}, agent.ResourceConstantLabels.Included)
	assert.Equal(t, []string{"k8s.pod.uid", "k8s.pod.name"}, agent.ResourceConstantLabels.Excluded)
	assert.Equal(t, 2*time.Minute, agent.MetricExpiration)
}

func TestConfigErrors(t *testing.T) {
	for name, want := range map[string]string{
		"no_endpoint":        "endpoint must be set",
		"bad_strategy":       `translation_strategy "Sideways" is not one of`,
		"bad_expiration":     "metric_expiration must be positive, got 0s",
		"deprecated_enabled": "resource_constant_labels: enabled and exclude_service_attributes are not supported; use included and excluded",
		"mixed_labels":       "resource_constant_labels: cannot configure both",
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorContains(t, confmap.Validate(configtest.Load[Config](t, NewFactory(), name)), want)
		})
	}
}

// Every resource_constant_labels pattern resourcetotelemetry accepts, this exporter reads the
// same way: excluded wins, no included means all, globs with * and ?.
func TestResourceMatcher(t *testing.T) {
	for _, c := range []struct {
		included, excluded []string
		yes, no            []string
	}{
		{nil, nil, nil, []string{"host.name"}},
		{[]string{"*"}, nil, []string{"host.name", ""}, nil},
		{[]string{"*"}, []string{"k8s.*"}, []string{"host.name"}, []string{"k8s.pod.uid"}},
		{nil, []string{"k8s.pod.uid"}, []string{"host.name", "k8s.pod.name"}, []string{"k8s.pod.uid"}},
		{[]string{"gpu.?"}, nil, []string{"gpu.a"}, []string{"gpu.ab", "gpu."}},
		{[]string{"a.b"}, nil, []string{"a.b"}, []string{"aXb"}},
	} {
		m, err := newResourceMatcher(settings(c.included, c.excluded))
		require.NoError(t, err)
		for _, k := range c.yes {
			assert.True(t, m.matches(k), "%v/%v: %q", c.included, c.excluded, k)
		}
		for _, k := range c.no {
			assert.False(t, m.matches(k), "%v/%v: %q", c.included, c.excluded, k)
		}
	}
}

func settings(included, excluded []string) resourcetotelemetry.Settings {
	return resourcetotelemetry.Settings{Included: included, Excluded: excluded}
}
