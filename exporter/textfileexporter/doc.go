// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package textfileexporter writes metrics in the Prometheus text format into a file for
// node_exporter's textfile collector (--collector.textfile.directory), for sites that keep
// node_exporter and its scrape. The names, labels and series are exactly the prometheus
// exporter's: this exporter runs the prometheus_page exporter itself, serving on a unix
// socket in the output directory, and writes what it serves, atomically (a temporary file
// renamed over the old one), after every batch and every write_interval, so series that the
// prometheus exporter expires (metric_expiration) or a receiver ends leave the file too.
package textfileexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter"
