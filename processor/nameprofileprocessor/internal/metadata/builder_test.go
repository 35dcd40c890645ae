// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metadata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// settings is what mdatagen's generated metrics test expects beside NewMetricsBuilder.
var settings = processortest.NewNopSettings(Type)

// TestBuilderResourceAttributes: builder.go lists no resource attributes, as metadata.yaml
// declares none. Once it does, NewMetricsBuilder must set up their filters from a hand-kept list
// (as gpu_attribution's builder.go does), held to metadata.yaml by a test like this one.
func TestBuilderResourceAttributes(t *testing.T) {
	assert.Empty(t, metadatatest.ResourceAttributes(t, "../../metadata.yaml"),
		"metadata.yaml declares resource attributes: give builder.go their list, as gpu_attribution's has")
}
