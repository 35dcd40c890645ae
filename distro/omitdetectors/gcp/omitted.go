// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package gcp stands in for go.opentelemetry.io/contrib/detectors/gcp in otelcol-gpu-agent (see ../README.md).
package gcp

import (
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/otelcol-gpu/otelcol-gpu/distro/omitdetectors"
)

func NewDetector() resource.Detector { return omitdetectors.Detector("gcp") }
