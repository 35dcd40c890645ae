// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package k8sgpuhealthconnector writes the GPU health the agents send into Kubernetes: each
// node's GPUHealthy condition, False while a fault that calls for action is open (an XID of an
// actionable resolution class, a lost or missing GPU, a hung driver, a double-bit ECC error, a
// row remap pending or failed, a degraded PCIe link) and True again once it clears, and one
// Event per fault with a count. One writer in the cluster: the collector that holds a Lease.
// It judges faults by the data's own timestamps, so a backlog an edge agent replays after an
// outage informs and changes nothing, and it keeps no state of its own: what it has written is
// read back from the API server. Opt-in, it quarantines the nodes its policy names: cordon, a
// NoSchedule taint for a drainer, an annotation of who, when and why, never a node someone else
// cordoned, behind a circuit breaker, and a dry run first.
package k8sgpuhealthconnector
