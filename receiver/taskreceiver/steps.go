// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// scrapeSteps records each running Slurm job step as a task: its cgroup's usage (the step's
// directory: v2's aggregates its tasks'; v1's in each controller Slurm made it in), no network
// metrics (a step runs in the node's network namespace: they would be the node's traffic). The
// step's state sits with the containers', by "slurm:<job>.<step>", and goes as theirs does.
func (s *taskScraper) scrapeSteps(now pcommon.Timestamp) {
	if s.steps == nil || s.stepsRoot == "" {
		return
	}
	running, err := s.steps.Running(s.stepsRoot)
	if err != nil {
		s.readFailed(metadata.AttributeSourceCgroup, "", err)
	}
	// Every running step was just looked up: the others' environments go.
	s.steps.Sweep()
	for i := range running {
		s.scrapeStep(now, &running[i])
	}
}

func (s *taskScraper) scrapeStep(now pcommon.Timestamp, r *slurm.RunningStep) {
	id := "slurm:" + r.Key()
	st := s.containers[id]
	if st == nil {
		st = &containerState{identified: true, kind: kindTask}
		s.containers[id] = st
	}
	st.seenIn = s.iterations
	stats, err := s.cgroups.Stat(r.Dir)
	if err != nil {
		s.readFailed(metadata.AttributeSourceCgroup, id, err)
		if !stats.CPUOK && !stats.MemoryOK && !stats.IOOK {
			return
		}
	}
	s.recordUsage(now, st, stats, netCounters{}, false)
	// A step first known by its cgroup path only is labeled again once its environment is read.
	if key := (containerResourceKey{stepFromEnviron: r.Job.FromEnviron}); !st.hasResource || key != st.resourceKey {
		rb := s.containerRB
		rb.SetNodeName(s.nodeName)
		r.Job.TaskLabels().SetOn(rb)
		rb.SetSlurmJobID(r.JobID)
		rb.SetSlurmStep(r.Step)
		st.resource, st.resourceKey, st.hasResource = rb.Emit(), key, true
	}
	s.containerMB.EmitForResource(metadata.WithResource(st.resource))
}
