// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package prometheuspageexporter serves metrics on a Prometheus scrape endpoint, with the names,
// labels and values of the contrib prometheus exporter, but makes the page once per collection
// instead of once per scrape: when a batch arrives, each resource in it has its part of the page
// rendered (one piece per metric family) and compressed; a scrape writes the pieces it holds,
// family by family, and computes nothing.
package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"
