// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metadata

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// settings is what mdatagen's generated metrics test expects beside NewMetricsBuilder.
var settings = processortest.NewNopSettings(Type)

// TestBuilderResourceAttributes: the hand-kept list of builder.go is metadata.yaml's resource
// attributes, no more and no fewer, so that metrics_include and metrics_exclude work on each.
func TestBuilderResourceAttributes(t *testing.T) {
	declared := metadatatest.ResourceAttributes(t, "../../metadata.yaml")
	listed := slices.Sorted(maps.Keys(resourceAttributes(DefaultResourceAttributesConfig())))
	for _, name := range declared {
		assert.Contains(t, listed, name, "metadata.yaml declares resource attribute %s: add it to resourceAttributes in builder.go", name)
	}
	for _, name := range listed {
		assert.Contains(t, declared, name, "builder.go lists resource attribute %s, which metadata.yaml does not declare: remove it from resourceAttributes", name)
	}
}
