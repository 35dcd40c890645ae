// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpunames

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames/internal/gennames"
)

// TestNamesAreMetadatas: names.go is what metadata.yaml generates (go generate after a change).
func TestNamesAreMetadatas(t *testing.T) {
	data, err := os.ReadFile("../metadata.yaml")
	require.NoError(t, err)
	want, err := gennames.Source(data)
	require.NoError(t, err)
	got, err := os.ReadFile("names.go")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "names.go disagrees with ../metadata.yaml: run go generate in receiver/gpureceiver/gpunames")
}
