// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package azurevm stands in for go.opentelemetry.io/contrib/detectors/azure/azurevm in otelcol-gpu-agent (see ../README.md).
package azurevm

import "github.com/otelcol-gpu/otelcol-gpu/distro/omitdetectors"

// ResourceDetector is what otelconf holds.
type ResourceDetector = omitdetectors.Omitted

func New() *ResourceDetector { return omitdetectors.Detector("azure.vm") }
