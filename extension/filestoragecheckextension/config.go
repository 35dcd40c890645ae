// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package filestoragecheckextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// Config names the directory to check.
type Config struct {
	// Directory is the file_storage extension's directory (give both the same value).
	Directory string `mapstructure:"directory"`
	// Timeout bounds the wait for a file that another process holds open (bbolt locks it); a
	// file still held then fails the start rather than being taken for corrupt.
	Timeout time.Duration `mapstructure:"timeout"`

	_ struct{}
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the directory is named and the timeout positive.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Directory == "" {
		errs = append(errs, errors.New("directory must be set to the file_storage extension's directory"))
	}
	if cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %s", cfg.Timeout))
	}
	return errors.Join(errs...)
}
