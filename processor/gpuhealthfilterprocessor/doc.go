// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package gpuhealthfilterprocessor keeps only the agents' GPU health data: the gpu receiver's
// gpu_health per GPU, its GPU count per node, and its XID log records, as internal/healthdata
// names them. In the scale-out layout the OTLP gateways forward that, and nothing else, to the
// one Deployment that writes it into Kubernetes (the k8s_gpu_health connector).
package gpuhealthfilterprocessor
