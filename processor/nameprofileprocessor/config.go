// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

import (
	"fmt"
	"slices"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

// Profiles a pipeline can choose.
const (
	ProfileOpenPAI = "openpai"
	ProfileDCGM    = "dcgm"
	ProfileSemconv = "semconv"
)

var profileNames = []string{ProfileOpenPAI, ProfileDCGM, ProfileSemconv}

// Config of the name_profile processor.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	// Profile names the names the pipeline's metrics leave with: openpai (as collected), dcgm
	// or semconv.
	Profile string `mapstructure:"profile"`
}

// Validate checks that the profile is one the processor knows.
func (c *Config) Validate() error {
	if !slices.Contains(profileNames, c.Profile) {
		return fmt.Errorf("profile must be one of %v, got %q", profileNames, c.Profile)
	}
	return nil
}
