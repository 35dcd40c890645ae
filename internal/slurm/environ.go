// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm"

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
)

// Job is what a step's environment says of its job, as slurmstepd sets it (src/common/env.c's
// setup_env and the gres plugins' gres_common_gpu_set_env).
type Job struct {
	ID          string // SLURM_JOB_ID
	User        string // SLURM_JOB_USER
	Account     string // SLURM_JOB_ACCOUNT
	Partition   string // SLURM_JOB_PARTITION
	Name        string // SLURM_JOB_NAME
	ArrayJobID  string // SLURM_ARRAY_JOB_ID: the array's job id; empty outside an array
	ArrayTaskID string // SLURM_ARRAY_TASK_ID
	// GPUs are the step's GPUs (SLURM_STEP_GPUS, or the job's SLURM_JOB_GPUS in the batch step,
	// which has no step list) as the node's GPU indexes Slurm numbers them by: the position of
	// each in the node's gres device list, which is the device minor (/dev/nvidia<minor>) where
	// gres.conf lists the device files in minor order, as AutoDetect does. Never
	// CUDA_VISIBLE_DEVICES, which ConstrainDevices renumbers from 0 inside the step. Nil when
	// the step holds no GPU.
	GPUs []int
	// FromEnviron is false when the environment could not be read and the job is known only by
	// its cgroup path (the id; none of the other fields).
	FromEnviron bool
}

// TaskLabels are the job's task labels: username and job_name from its environment, the others
// (OpenPAI's) unknown; unknown too where the environment could not be read.
func (j Job) TaskLabels() tasklabels.Labels {
	l := tasklabels.Unlabelled()
	if j.User != "" {
		l.Username = j.User
	}
	if j.Name != "" {
		l.JobName = j.Name
	}
	return l
}

// JobFromEnviron reads the job of a step (as Location.Step names it) from the environment of one
// of its processes (/proc/<pid>/environ's variables). A GPU list that is not Slurm's
// (comma-separated indexes) is an error naming the variable; the other fields are read regardless.
func JobFromEnviron(env map[string]string, step string) (Job, error) {
	j := Job{
		ID:          env["SLURM_JOB_ID"],
		User:        env["SLURM_JOB_USER"],
		Account:     env["SLURM_JOB_ACCOUNT"],
		Partition:   env["SLURM_JOB_PARTITION"],
		Name:        env["SLURM_JOB_NAME"],
		ArrayJobID:  env["SLURM_ARRAY_JOB_ID"],
		ArrayTaskID: env["SLURM_ARRAY_TASK_ID"],
		FromEnviron: true,
	}
	if j.ID == "" {
		return j, fmt.Errorf("environment has no SLURM_JOB_ID")
	}
	// A step started by srun gets its own list, and Slurm unsets it for a step without GPUs
	// (srun --gres=none) while the job's list, inherited from the batch script, stays: so only
	// the batch, interactive and extern steps, which run with the job's allocation, read the
	// job's.
	name := "SLURM_STEP_GPUS"
	if _, err := strconv.ParseUint(strings.SplitN(step, "+", 2)[0], 10, 32); err != nil {
		name = "SLURM_JOB_GPUS"
	}
	gpus, err := ParseGPUList(env[name])
	if err != nil {
		return j, fmt.Errorf("%s: %w", name, err)
	}
	j.GPUs = gpus
	return j, nil
}

// ParseGPUList reads a SLURM_STEP_GPUS or SLURM_JOB_GPUS value: GPU indexes joined by commas
// (gres_common.c's common_gres_set_env prints each with %d), possibly empty.
func ParseGPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	fields := strings.Split(s, ",")
	gpus := make([]int, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseUint(f, 10, 31)
		if err != nil {
			return nil, fmt.Errorf("%q is not a list of GPU indexes", s)
		}
		gpus = append(gpus, int(n))
	}
	return gpus, nil
}
