// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package azurevm stands in for go.opentelemetry.io/contrib/detectors/azure/azurevm in otelcol-gpu-agent (see ../README.md).
package azurevm

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/sdk/resource"
)

// ResourceDetector is what otelconf holds; it detects nothing here.
type ResourceDetector = omitted

func New() *ResourceDetector { return &omitted{} }

type omitted struct{}

func (omitted) Detect(context.Context) (*resource.Resource, error) {
	return nil, errors.New("the azure.vm resource detector is not built into otelcol-gpu-agent (builder-agent.yaml)")
}
