// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package goldentest compares a test's output with its checked-in expectation (a golden file)
// or, when the test binary runs with -update, rewrites the expectation from the output first.
// It holds the one -update flag of the module's tests: every test binary that imports it gets
// the flag (make e2e E2E_FLAGS=-update passes it on), and every golden test goes through it.
package goldentest // import "github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"

import (
	"flag"
	"os"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var update = flag.Bool("update", false, "rewrite the golden files (expected metrics, logs and pages) from the tests' output; review them with git diff")

// Updating is whether this run rewrites the golden files.
func Updating() bool { return *update }

// missing is said when a golden file cannot be read.
const missing = "rerun the test with -update to write it (make e2e E2E_FLAGS=-update for test/e2e)"

// Metrics compares actual with file's metrics (contrib's golden YAML). Under -update it writes
// file first, and the test fails so that a rewrite is never taken for a pass.
func Metrics(tb testing.TB, file string, actual pmetric.Metrics, opts ...pmetrictest.CompareMetricsOption) {
	tb.Helper()
	compare(tb, file, actual,
		func(md pmetric.Metrics) error { return golden.WriteMetrics(tb, file, md) },
		golden.ReadMetrics,
		func(expected pmetric.Metrics) error { return pmetrictest.CompareMetrics(expected, actual, opts...) })
}

// Logs is Metrics for log records.
func Logs(tb testing.TB, file string, actual plog.Logs, opts ...plogtest.CompareLogsOption) {
	tb.Helper()
	compare(tb, file, actual,
		func(ld plog.Logs) error { return golden.WriteLogs(tb, file, ld) },
		golden.ReadLogs,
		func(expected plog.Logs) error { return plogtest.CompareLogs(expected, actual, opts...) })
}

// compare is the compare-or-rewrite of Metrics and Logs.
func compare[T any](tb testing.TB, file string, actual T, write func(T) error, read func(string) (T, error), differ func(expected T) error) {
	tb.Helper()
	if *update {
		require.NoError(tb, write(actual))
	}
	expected, err := read(file)
	require.NoError(tb, err, missing)
	require.NoError(tb, differ(expected))
}

// Text compares actual with file's content byte for byte (a Prometheus page); under -update it
// writes file first. A difference fails the test without stopping it, so checks of the same
// page that follow still run.
func Text(tb testing.TB, file, actual string) {
	tb.Helper()
	if *update {
		require.NoError(tb, os.WriteFile(file, []byte(actual), 0o644)) //nolint:gosec // G306: a golden file is checked in, like the repository's other files
	}
	expected, err := os.ReadFile(file)
	require.NoError(tb, err, missing)
	assert.Equal(tb, string(expected), actual)
}
