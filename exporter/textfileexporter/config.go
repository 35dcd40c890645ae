// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package textfileexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter"

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/resourcetotelemetry"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"
)

// Config says where the file goes and, in the prometheus exporter's own keys, how metrics are
// named and labeled.
type Config struct {
	// Directory is node_exporter's --collector.textfile.directory; it must exist.
	Directory string `mapstructure:"directory"`
	// Filename is the file's name in Directory; node_exporter reads only names ending in .prom.
	Filename string `mapstructure:"filename"`
	// WriteInterval rewrites the file even without new data, so that expired series leave it.
	WriteInterval time.Duration `mapstructure:"write_interval"`
	// ExcludeMetrics are patterns (path.Match syntax) of Prometheus metric names left out of the
	// file. By default node_*: node_exporter serves those itself, and a name it also collects
	// would fail its scrape ("collected before with the same name and label values").
	ExcludeMetrics []string `mapstructure:"exclude_metrics"`

	// The prometheus exporter's settings (see its README), with its defaults.
	Namespace              string                       `mapstructure:"namespace"`
	ConstLabels            map[string]string            `mapstructure:"const_labels"`
	TranslationStrategy    string                       `mapstructure:"translation_strategy"`
	WithoutScopeInfo       bool                         `mapstructure:"without_scope_info"`
	ResourceConstantLabels resourcetotelemetry.Settings `mapstructure:"resource_constant_labels"`
	MetricExpiration       time.Duration                `mapstructure:"metric_expiration"`
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Directory == "" {
		errs = append(errs, errors.New("directory must be set: node_exporter's --collector.textfile.directory"))
	} else if fi, err := os.Stat(cfg.Directory); err != nil || !fi.IsDir() {
		errs = append(errs, fmt.Errorf("directory %q is not a directory: create it (node_exporter's --collector.textfile.directory) or mount it writable", cfg.Directory))
	}
	switch {
	case !strings.HasSuffix(cfg.Filename, ".prom"):
		errs = append(errs, fmt.Errorf("filename must end in .prom (node_exporter reads no other file), got %q", cfg.Filename))
	case cfg.Filename != filepath.Base(cfg.Filename) || strings.HasPrefix(cfg.Filename, "."):
		errs = append(errs, fmt.Errorf("filename must be a plain file name in directory, got %q", cfg.Filename))
	}
	for _, p := range cfg.ExcludeMetrics {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("exclude_metrics: bad pattern %q: %w", p, err))
		}
	}
	if cfg.WriteInterval <= 0 {
		errs = append(errs, fmt.Errorf("write_interval must be positive, got %s", cfg.WriteInterval))
	}
	if _, err := cfg.prometheusConfig(".validate.sock"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// prometheusConfig is the configuration of the prometheus exporter that renders the file,
// serving on the unix socket at socket.
func (cfg *Config) prometheusConfig(socket string) (*prometheuspageexporter.Config, error) {
	pcfg := prometheuspageexporter.NewFactory().CreateDefaultConfig().(*prometheuspageexporter.Config)
	settings := map[string]any{
		"endpoint":           socket,
		"transport":          "unix",
		"namespace":          cfg.Namespace,
		"const_labels":       cfg.ConstLabels,
		"without_scope_info": cfg.WithoutScopeInfo,
		"metric_expiration":  cfg.MetricExpiration,
		"resource_constant_labels": map[string]any{
			"included": cfg.ResourceConstantLabels.Included,
			"excluded": cfg.ResourceConstantLabels.Excluded,
		},
	}
	if cfg.TranslationStrategy != "" {
		settings["translation_strategy"] = cfg.TranslationStrategy
	}
	if err := confmap.NewFromStringMap(settings).Unmarshal(pcfg); err != nil {
		return nil, err
	}
	if err := confmap.Validate(pcfg); err != nil {
		return nil, err
	}
	return pcfg, nil
}

func createDefaultConfig() component.Config {
	pcfg := prometheuspageexporter.NewFactory().CreateDefaultConfig().(*prometheuspageexporter.Config)
	return &Config{
		Filename:         "otelcol-gpu.prom",
		WriteInterval:    15 * time.Second,
		ExcludeMetrics:   []string{"node_*"},
		ConstLabels:      map[string]string{},
		MetricExpiration: pcfg.MetricExpiration,
	}
}
