// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package gpuattributionprocessor joins GPUs to the jobs that hold them: on each batch of the
// gpu receiver it adds task_gpu_percent and task_gpu_mem_percent per task and GPU, the GPU
// processes that belong to no pod, and containers that outlived their pod.
package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"
