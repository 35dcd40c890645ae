// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package ecs stands in for go.opentelemetry.io/contrib/detectors/aws/ecs in otelcol-gpu-agent (see ../README.md).
package ecs

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/sdk/resource"
)

func NewResourceDetector() resource.Detector { return omitted{} }

type omitted struct{}

func (omitted) Detect(context.Context) (*resource.Resource, error) {
	return nil, errors.New("the aws.ecs resource detector is not built into otelcol-gpu-agent (builder-agent.yaml)")
}
