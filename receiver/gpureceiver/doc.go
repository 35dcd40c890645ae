// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package gpureceiver reports every NVIDIA GPU of a node through NVML (go-nvml, behind an
// injected nvml.Interface): OpenPAI's gpu_* and nvidiasmi_* series, health and performance
// metrics, per-process GPU use, and XID errors from the NVML event set and the kernel log, as a
// counter and as log records. A simulated backend drives go-nvml's mock servers from a scenario
// file so the whole pipeline runs on machines without GPUs.
package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
