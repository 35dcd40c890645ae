// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/resourcetotelemetry"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
)

// Config holds the contrib prometheus exporter's keys that this exporter offers, with the same
// meaning and defaults, so that a configuration moves from one to the other by its type alone.
type Config struct {
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`

	// TranslationStrategy names how OTLP names become Prometheus names (otlptranslator's
	// strategies); empty is UnderscoreEscapingWithSuffixes, the contrib exporter's default.
	TranslationStrategy otlptranslator.TranslationStrategyOption `mapstructure:"translation_strategy"`
	// WithoutScopeInfo leaves out the otel_scope_* labels.
	WithoutScopeInfo bool `mapstructure:"without_scope_info"`
	// ResourceConstantLabels names the resource attributes that become labels of every series.
	ResourceConstantLabels resourcetotelemetry.Settings `mapstructure:"resource_constant_labels"`
	// MetricExpiration drops a series this long after its last data point arrived.
	MetricExpiration time.Duration `mapstructure:"metric_expiration"`
	// Namespace prefixes every metric name (and target_info).
	Namespace string `mapstructure:"namespace"`
	// ConstLabels are labels of every series but target_info.
	ConstLabels map[string]string `mapstructure:"const_labels"`
}

var _ confmap.Validator = (*Config)(nil)

// strategies are the translation strategies the contrib exporter accepts.
var strategies = []otlptranslator.TranslationStrategyOption{
	otlptranslator.UnderscoreEscapingWithSuffixes,
	otlptranslator.UnderscoreEscapingWithoutSuffixes,
	otlptranslator.NoUTF8EscapingWithSuffixes,
	otlptranslator.NoTranslation,
}

// Validate checks the configuration at start-up, naming the key at fault.
func (cfg *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(cfg.ServerConfig.NetAddr.Endpoint) == "" {
		errs = append(errs, errors.New("endpoint must be set: the address Prometheus scrapes, e.g. 0.0.0.0:9102"))
	}
	if cfg.TranslationStrategy != "" && !isStrategy(cfg.TranslationStrategy) {
		errs = append(errs, fmt.Errorf("translation_strategy %q is not one of %v", cfg.TranslationStrategy, strategies))
	}
	//nolint:staticcheck // the deprecated keys are refused, as the contrib exporter refuses them
	if cfg.ResourceConstantLabels.Enabled || cfg.ResourceConstantLabels.ExcludeServiceAttributes {
		errs = append(errs, errors.New("resource_constant_labels: enabled and exclude_service_attributes are not supported; use included and excluded"))
	}
	if err := cfg.ResourceConstantLabels.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("resource_constant_labels: %w", err))
	}
	if cfg.MetricExpiration <= 0 {
		errs = append(errs, fmt.Errorf("metric_expiration must be positive, got %s", cfg.MetricExpiration))
	}
	return errors.Join(errs...)
}

func isStrategy(s otlptranslator.TranslationStrategyOption) bool {
	return slices.Contains(strategies, s)
}

// strategy is the translation strategy in effect.
func (cfg *Config) strategy() otlptranslator.TranslationStrategyOption {
	if cfg.TranslationStrategy == "" {
		return otlptranslator.UnderscoreEscapingWithSuffixes
	}
	return cfg.TranslationStrategy
}

func createDefaultConfig() component.Config {
	return &Config{
		ServerConfig:     confighttp.NewDefaultServerConfig(),
		MetricExpiration: 5 * time.Minute,
	}
}
