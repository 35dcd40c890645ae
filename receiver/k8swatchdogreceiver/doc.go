// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package k8swatchdogreceiver watches pods and nodes through client-go shared informers and
// reports, on every collection, OpenPAI watchdog's cluster metrics (pai_pod_count,
// pai_node_count, k8s_node_gpu_*, k8s_api_server_count, ...) computed from the informers' caches,
// and, as they happen, every pod phase, container state, container restart, node condition and
// cordon change as a log record.
package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"
