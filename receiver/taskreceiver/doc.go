// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package taskreceiver reads a node's /proc and cgroup tree (through a configurable root path)
// and reports node metrics under node_exporter's names, per-container ("task") resource use under
// OpenPAI's job-exporter names, and the processes an operator looks for when a node misbehaves.
package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"
