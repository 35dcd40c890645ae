// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package metadatatest reads a component's metadata.yaml in tests, to hold what is written by
// hand beside mdatagen's code (the processors' NewMetricsBuilder) to it.
package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// ResourceAttributes are the names the metadata.yaml at path declares under
// resource_attributes, sorted.
func ResourceAttributes(tb testing.TB, path string) []string {
	tb.Helper()
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	var metadata struct {
		ResourceAttributes map[string]any `yaml:"resource_attributes"`
	}
	require.NoError(tb, yaml.Unmarshal(data, &metadata), path)
	return slices.Sorted(maps.Keys(metadata.ResourceAttributes))
}
