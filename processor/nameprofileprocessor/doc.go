// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package nameprofileprocessor renames the distribution's metrics and labels, at the end of a
// pipeline, to the names another ecosystem's dashboards and backends expect: dcgm-exporter's
// DCGM_FI_* series, or OpenTelemetry's hardware semantic conventions. The collection code stays
// one; only the names, units, types and label keys change.
package nameprofileprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor"
