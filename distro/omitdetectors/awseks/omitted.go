// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package eks stands in for go.opentelemetry.io/contrib/detectors/aws/eks in otelcol-gpu-agent (see ../README.md).
package eks

import (
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/otelcol-gpu/otelcol-gpu/distro/omitdetectors"
)

func NewResourceDetector() resource.Detector { return omitdetectors.Detector("aws.eks") }
