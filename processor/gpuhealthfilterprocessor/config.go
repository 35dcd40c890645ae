// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuhealthfilterprocessor

// Config of the gpu_health_filter processor: none. What it keeps is what the k8s_gpu_health
// connector reads, which is not a choice of the gateway that forwards it.
type Config struct{}
