// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package metadatatest reads a component's metadata.yaml in tests, to hold what is written by
// hand beside mdatagen's code (the processors' NewMetricsBuilder, a connector's log records) to
// it.
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

// Events are the events the metadata.yaml at path declares, each with its attributes' names
// (an attribute's name_override where it has one).
func Events(tb testing.TB, path string) map[string][]string {
	tb.Helper()
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	var metadata struct {
		Attributes map[string]struct {
			NameOverride string `yaml:"name_override"`
		} `yaml:"attributes"`
		Events map[string]struct {
			Attributes []string `yaml:"attributes"`
		} `yaml:"events"`
	}
	require.NoError(tb, yaml.Unmarshal(data, &metadata), path)
	events := map[string][]string{}
	for name, e := range metadata.Events {
		for _, a := range e.Attributes {
			if o := metadata.Attributes[a].NameOverride; o != "" {
				a = o
			}
			events[name] = append(events[name], a)
		}
		slices.Sort(events[name])
	}
	return events
}
