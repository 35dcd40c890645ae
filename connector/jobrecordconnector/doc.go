// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package jobrecordconnector turns the metrics of running jobs into one log record per job
// when it ends: who ran it, when, on which GPUs, the GPU-hours it held and used, its
// utilization and memory, the energy its GPUs drew, the time they were throttled, the XID and
// ECC errors they had, and a verdict on its efficiency. A job is whatever the configured
// job_labels name (OpenPAI's job, a pod, a Slurm job), so a job on several nodes, or one that
// outlives an agent's restart, is one record. The totals live in the gateway and are
// checkpointed into a storage extension (file_storage), so a gateway restart loses nothing.
package jobrecordconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/jobrecordconnector"
