// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseDmon reads the samples of `nvidia-smi dmon --gpm-metrics <ids>` (or `dcgmi dmon -e
// <ids>`): '#' lines are headers, each other line a GPU index (dcgmi: "GPU <index>") and one
// value per metric asked for, in the order asked. A value that is not a number ("-", "N/A": not
// supported) is left out. It returns, per GPU index, each metric column's values.
func parseDmon(out string, metrics int) map[int][][]float64 {
	samples := map[int][][]float64{}
	for line := range strings.SplitSeq(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "GPU" || fields[0] == "gpu" { // dcgmi's entity column
			fields = fields[1:]
		}
		if len(fields) < 1+metrics {
			continue
		}
		gpu, err := strconv.Atoi(fields[0])
		if err != nil || gpu < 0 {
			continue
		}
		if samples[gpu] == nil {
			samples[gpu] = make([][]float64, metrics)
		}
		for i := range metrics {
			if v, err := strconv.ParseFloat(fields[1+i], 64); err == nil {
				samples[gpu][i] = append(samples[gpu][i], v)
			}
		}
	}
	return samples
}

// TestParseDmon reads both tools' layouts, skipping headers and unsupported values.
func TestParseDmon(t *testing.T) {
	smi := `# gpu  gract  smact  smocc
# Idx      %      %      %
    0     12     10      4
    1      -      0      0
    0     14     12      6
`
	got := parseDmon(smi, 3)
	assert.Equal(t, [][]float64{{12, 14}, {10, 12}, {4, 6}}, got[0])
	assert.Equal(t, [][]float64{nil, {0}, {0}}, got[1], "'-' is not supported: left out")

	dcgmi := `#Entity   GRACT   SMACT
ID
GPU 0     0.120   0.100
GPU 1     N/A     0.000
`
	got = parseDmon(dcgmi, 2)
	require.Len(t, got, 2)
	assert.Equal(t, [][]float64{{0.12}, {0.1}}, got[0])
	assert.Equal(t, [][]float64{nil, {0}}, got[1])
}

// FuzzParseDmon: any text, any column count, never a panic.
func FuzzParseDmon(f *testing.F) {
	f.Add("# gpu gract\n    0   12\n", 1)
	f.Add("GPU 0  0.5 N/A\nGPU x 1 2\n", 2)
	f.Fuzz(func(t *testing.T, out string, metrics int) {
		if metrics < 0 || metrics > 64 {
			return
		}
		for gpu, cols := range parseDmon(out, metrics) {
			if gpu < 0 || len(cols) != metrics {
				t.Fatalf("GPU %d with %d columns, asked for %d", gpu, len(cols), metrics)
			}
		}
	})
}
