// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package omitdetectors is the detector behind the modules in its subdirectories, which stand in
// for the collector telemetry's cloud resource detectors in otelcol-gpu-agent (see README.md).
package omitdetectors

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/sdk/resource"
)

// Detector is a resource detector that fails naming the detector the agent was built without:
// a configuration that asks for it stops at start-up instead of running without it.
func Detector(name string) *Omitted { return &Omitted{name: name} }

// Omitted is the detector a configuration asked for and the agent's build left out.
type Omitted struct{ name string }

// Detect fails: the detector is not in this build.
func (o *Omitted) Detect(context.Context) (*resource.Resource, error) {
	return nil, fmt.Errorf("the %s resource detector is not built into otelcol-gpu-agent (builder-agent.yaml)", o.name)
}
