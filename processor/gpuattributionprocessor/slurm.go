// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
)

// slurmSettings are the slurm source's; nil when it is not a source.
type slurmSettings struct {
	layout slurm.CgroupLayout
	// jobMappingDir is dcgm-exporter's job-mapping directory on the host; "" none.
	jobMappingDir string
}

// slurmStep is the Slurm job step a task stands for: its processes are the step's, its GPUs those
// its environment names (or, for a job known only from the job-mapping files, those files').
type slurmStep struct {
	slurm.Process
	// hostID is the container slurmd runs in (Slurm on Kubernetes: Slinky's slurmd pod), whose
	// GPUs the kubelet allocated for Slurm to hand out; "" on bare metal.
	hostID string
	// mapped: known only from a job-mapping file (the job id, nothing else).
	mapped bool
}

// stepID names a step's task uniquely among the node's containers (and sorts them apart).
func stepID(key string) string { return "slurm:" + key }

// newStepTask is the task a step (or a job of the job-mapping files) stands for.
func newStepTask(p slurm.Process, dir, hostID string, mapped bool) *container {
	return &container{
		id:        stepID(p.Key()),
		cgroupDir: dir,
		task:      true,
		labels:    p.Job.TaskLabels(),
		step:      &slurmStep{Process: p, hostID: hostID, mapped: mapped},
	}
}

// hostOf is the id of the container a cgroup path is in ("" for none).
func hostOf(cgroupPath string) string {
	if c, ok := cgroupfs.ContainerOf(cgroupPath); ok {
		return c.ID
	}
	return ""
}

// slurmView is what a refresh found of Slurm on the node.
type slurmView struct {
	// steps are the running steps, by slurm.Location.Key.
	steps map[string]*container
	// mapped are the jobs the job-mapping files name and no step of which runs on the node, by
	// job id; jobMapping the files, by GPU.
	mapped     map[string]*container
	jobMapping map[slurm.MappingKey][]string
	// uuidByMinor is the NVIDIA driver's GPU UUID of each /dev/nvidia<minor>, by which Slurm's
	// GPU indexes are joined; nil where the node has none of the driver's files.
	uuidByMinor map[int]string
}

// readSlurm walks Slurm's steps and reads the job-mapping files and the driver's GPU minors.
func (n *node) readSlurm() *slurmView {
	if n.steps == nil {
		return nil
	}
	v := &slurmView{steps: map[string]*container{}, mapped: map[string]*container{}}
	if n.slurmMount != "" {
		running, err := n.steps.Running(n.slurmMount)
		if err != nil {
			n.slurmErrors.Add(1)
			n.set.logger.Warn("Slurm's cgroup tree could not be walked: steps without a GPU process are not seen", zap.Error(err))
		}
		for i := range running {
			r := &running[i]
			v.steps[r.Key()] = newStepTask(r.Process, filepath.Join(n.slurmMount, r.Dir), hostOf(r.Dir), false)
		}
		// Every running step was just looked up: the others' environments go.
		n.steps.Sweep()
	}
	driver, err := readNvidiaDriver(n.set.root)
	switch {
	case len(driver.uuids) > 0:
		v.uuidByMinor = driver.uuids
		if err != nil {
			n.slurmErrors.Add(1)
		}
	case !errors.Is(err, fs.ErrNotExist):
		n.slurmErrors.Add(1)
	}
	if n.set.slurm.jobMappingDir != "" {
		mapping, err := slurm.ReadJobMapping(filepath.Join(n.set.root, n.set.slurm.jobMappingDir))
		if err != nil {
			n.slurmErrors.Add(1)
			n.set.logger.Debug("The job-mapping directory could not be read whole", zap.Error(err))
		}
		v.jobMapping = mapping
		running := map[string]bool{}
		for _, c := range v.steps {
			running[c.step.JobID] = true
		}
		for _, jobs := range mapping {
			for _, job := range jobs {
				if !running[job] && v.mapped[job] == nil {
					p := slurm.Process{Location: slurm.Location{JobID: job}, Job: slurm.Job{ID: job}}
					v.mapped[job] = newStepTask(p, "", "", true)
				}
			}
		}
	}
	return v
}

// stepOfProcess is the step task of a process in one of Slurm's steps (the inventory's, or one
// started since the refresh); ok is false outside a step, err set when the process could not be
// read. A step's slurmstepd is not the step's task.
func (n *node) stepOfProcess(pid int, cgroupPaths []string, inv *inventory) (c *container, ok bool, err error) {
	p, inStep, err := n.steps.StepOf(pid)
	if err != nil || !inStep || !p.IsTask() {
		return nil, false, err
	}
	if known := inv.slurm.steps[p.Key()]; known != nil {
		return known, true, nil
	}
	host := ""
	for _, path := range cgroupPaths {
		if host = hostOf(path); host != "" {
			break
		}
	}
	return newStepTask(p, "", host, false), true, nil
}

// claimSlurm claims for each step the GPUs its environment names (Slurm's indexes, joined by
// device minor) and those its processes are on; for each job of the job-mapping files no step
// of which runs here, its GPU.
func claimSlurm(gpus []gpuReading, inv *inventory, devs deviceIndex, isAlive func(*container) bool, claim func(target, *container, claimRef)) {
	v := inv.slurm
	steps := make([]*container, 0, len(v.steps))
	for _, c := range v.steps {
		steps = append(steps, c)
	}
	for i := range gpus {
		for _, pr := range gpus[i].procs {
			if c := pr.owner; c != nil && c.step != nil {
				if v.steps[c.step.Key()] != c && !slices.Contains(steps, c) {
					steps = append(steps, c)
				}
				claim(target{gpu: i, mig: -1}, c, claimRef{})
			}
		}
	}
	for _, c := range steps {
		if c.cgroupDir != "" && !isAlive(c) {
			continue
		}
		for _, index := range c.step.Job.GPUs {
			if t, ok := v.resolveIndex(devs, index); ok {
				claim(t, c, claimRef{})
			}
		}
	}
	for key, jobs := range v.jobMapping {
		t, ok := mappedTarget(gpus, devs, key)
		if !ok {
			continue
		}
		for _, job := range jobs {
			if c := v.mapped[job]; c != nil {
				claim(t, c, claimRef{})
			}
		}
	}
}

// resolveIndex finds the GPU of Slurm's index: the device minor (/dev/nvidia<index>, gres.conf
// listing the device files in order), by the NVIDIA driver's files; where the node has none of
// them (the simulated backend, AMD), the gpu receiver's minor_number.
func (v *slurmView) resolveIndex(devs deviceIndex, index int) (target, bool) {
	if v.uuidByMinor != nil {
		uuid, ok := v.uuidByMinor[index]
		if !ok {
			return target{}, false
		}
		return devs.resolve(uuid)
	}
	return devs.resolve(strconv.Itoa(index))
}

// mappedTarget is the GPU or MIG instance a job-mapping file names: DCGM's GPU id, which is
// NVML's index (minor_number), and the GPU instance id.
func mappedTarget(gpus []gpuReading, devs deviceIndex, key slurm.MappingKey) (target, bool) {
	t, ok := devs.resolve(strconv.FormatUint(uint64(key.GPU), 10))
	if !ok || !key.MIG {
		return t, ok
	}
	instance := strconv.FormatUint(uint64(key.Instance), 10)
	for j, m := range gpus[t.gpu].migs {
		if m.gi == instance {
			return target{gpu: t.gpu, mig: j}, true
		}
	}
	return target{}, false
}

// hostHolds: the kubelet allocated the GPU to the container a step's slurmd runs in (Slinky), so
// Slurm hands it out.
func hostHolds(c *container, inv *inventory, allocated map[*container][]bool, t target) bool {
	if c.step == nil || c.step.hostID == "" {
		return false
	}
	own := allocated[inv.containers[c.step.hostID]]
	return t.gpu < len(own) && own[t.gpu]
}

// recordSlurmJobs records slurm_job_info for each job with a step on the node or a holder of a
// GPU of this batch: its fields from a step whose environment was read, where one was.
func (p *gpuAttribution) recordSlurmJobs(ts pcommon.Timestamp, inv *inventory, tasks []*container) {
	jobs := map[string]*slurmStep{}
	add := func(c *container) {
		s := c.step
		if s == nil || s.JobID == "" {
			return
		}
		if known := jobs[s.JobID]; known == nil || !known.Job.FromEnviron && s.Job.FromEnviron {
			jobs[s.JobID] = s
		}
	}
	for _, c := range inv.slurm.steps {
		add(c)
	}
	for _, c := range tasks {
		add(c)
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	orUnknown := func(s string) string {
		if s == "" {
			return tasklabels.Unknown
		}
		return s
	}
	for _, id := range ids {
		j := jobs[id].Job
		p.mb.RecordSlurmJobInfoDataPoint(ts, 1, id, orUnknown(j.User), orUnknown(j.Name), orUnknown(j.Account), orUnknown(j.Partition), j.ArrayJobID, j.ArrayTaskID)
	}
}
