// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

// Profile is the set of names a pipeline's metrics leave with.
type Profile string

// Profiles a pipeline can choose.
const (
	// ProfileOpenPAI: the names as collected.
	ProfileOpenPAI Profile = "openpai"
	// ProfileDCGM: dcgm-exporter's.
	ProfileDCGM Profile = "dcgm"
	// ProfileSemconv: OpenTelemetry's hardware semantic conventions.
	ProfileSemconv Profile = "semconv"
)

// Profiles are the values a Profile may take.
var Profiles = []Profile{ProfileOpenPAI, ProfileDCGM, ProfileSemconv}

// Validate accepts one of Profiles.
func (p Profile) Validate() error { return enum.Check(p, Profiles) }

// DCGMVersion is the dcgm-exporter generation whose names the dcgm profile emits.
type DCGMVersion string

// Generations of dcgm-exporter's names.
const (
	// DCGM48: dcgm-exporter 4.8.x (DCGM 4.6 and older names: DCGM_FI_DEV_SM_CLOCK in MHz…).
	DCGM48 DCGMVersion = "4.8"
	// DCGM410: dcgm-exporter 4.10 (DCGM 4.7's names: DCGM_FI_DEV_SM_CLOCK_HERTZ in Hz…).
	DCGM410 DCGMVersion = "4.10"
)

// DCGMVersions are the values a DCGMVersion may take.
var DCGMVersions = []DCGMVersion{DCGM48, DCGM410}

// Validate accepts one of DCGMVersions.
func (v DCGMVersion) Validate() error { return enum.Check(v, DCGMVersions) }

// Config of the name_profile processor.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	Profile Profile `mapstructure:"profile"`
	// DCGMVersion is the dcgm-exporter generation the dcgm profile follows; the default, 4.8,
	// keeps the names dashboards made for 4.8 query.
	DCGMVersion DCGMVersion `mapstructure:"dcgm_version"`
}

// Validate rejects a dcgm_version other than the default on a profile that has no DCGM names.
func (c *Config) Validate() error {
	if c.Profile != ProfileDCGM && c.DCGMVersion != DCGM48 {
		return fmt.Errorf("dcgm_version: applies to profile dcgm only; profile is %q", c.Profile)
	}
	return nil
}
