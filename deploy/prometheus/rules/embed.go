// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package rules

import _ "embed"

// FleetHealth is fleet-health.yaml, for gpureport's demo, which records its rules over the demo
// week: the binary runs without the repository beside it.
//
//go:embed fleet-health.yaml
var FleetHealth []byte
