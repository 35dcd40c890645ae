// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package filestoragecheckextension checks, when the collector starts, every database file that
// the contrib file_storage extension keeps in its directory (the exporters' persistent queues),
// and moves a corrupt one aside with a log line that says so. A power cut can leave a queue file
// truncated or overwritten; bbolt then refuses it ("invalid database") or panics, and
// file_storage's own `recreate` option covers only the panic: without this check the collector
// would not start until someone deleted the file by hand. It runs before any exporter opens its
// queue, because the collector starts every extension before the pipelines.
package filestoragecheckextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension"
