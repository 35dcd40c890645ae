// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package gcp stands in for go.opentelemetry.io/contrib/detectors/gcp in otelcol-gpu-agent (see ../README.md).
package gcp

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/sdk/resource"
)

func NewDetector() resource.Detector { return omitted{} }

type omitted struct{}

func (omitted) Detect(context.Context) (*resource.Resource, error) {
	return nil, errors.New("the gcp resource detector is not built into otelcol-gpu-agent (builder-agent.yaml)")
}
