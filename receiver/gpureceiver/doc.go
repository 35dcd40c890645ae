// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package gpureceiver reports a node's GPUs: OpenPAI's gpu_* and nvidiasmi_*/rocmsmi_* series,
// health and performance metrics, per-process GPU use and, on NVIDIA, XID errors from the NVML
// event set and the kernel log, as a counter and as log records. Where the readings come from
// is a backend (backend.go): NVML (nvml*.go, go-nvml behind an injected nvml.Interface), the
// amdgpu driver's and the KFD's files (amdgpu.go), or the simulation, which is the NVML backend
// over a mock library driven by a scenario file so the whole pipeline runs without GPUs. The
// scraper (scraper.go) turns any backend's readings into the receiver's output; the names of
// that output are package gpunames's.
package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
