// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package ec2 stands in for go.opentelemetry.io/contrib/detectors/aws/ec2/v2 in otelcol-gpu-agent (see ../README.md).
package ec2

import (
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/otelcol-gpu/otelcol-gpu/distro/omitdetectors"
)

func NewResourceDetector() resource.Detector { return omitdetectors.Detector("aws.ec2") }
