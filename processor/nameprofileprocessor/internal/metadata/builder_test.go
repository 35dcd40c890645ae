// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metadata

import "go.opentelemetry.io/collector/processor/processortest"

// settings is what mdatagen's generated metrics test expects beside NewMetricsBuilder.
var settings = processortest.NewNopSettings(Type)
