// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"

import (
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

// Config of the name_profile processor.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	Profile Profile `mapstructure:"profile"`
}
