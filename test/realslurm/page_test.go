// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realslurm

package realslurm_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"
	"github.com/otelcol-gpu/otelcol-gpu/test/realslurm"
)

// deviceUtilization is every simulated GPU's utilization.
const deviceUtilization = 60

// agentPage is the agent's GPU pipeline on the real node, in-process: the gpu receiver's
// simulated GPUs, whose processes are the jobs' real pids (a scenario the test writes), through
// gpu_attribution reading the node's own /proc and cgroups with the slurm source.
type agentPage struct {
	t        *testing.T
	scenario string
	attr     processor.Metrics
	sink     *consumertest.MetricsSink
}

func startAgentPage(t *testing.T, dir string) *agentPage {
	t.Helper()
	f := gpuattributionprocessor.NewFactory()
	cfg := f.CreateDefaultConfig().(*gpuattributionprocessor.Config)
	cfg.AllocationSources = []gpuattributionprocessor.Source{gpuattributionprocessor.SourceSlurm, gpuattributionprocessor.SourceProcess}
	cfg.RefreshInterval = time.Second
	p := &agentPage{t: t, scenario: filepath.Join(dir, "scenario.yaml"), sink: new(consumertest.MetricsSink)}
	var err error
	p.attr, err = f.CreateMetrics(t.Context(), processortest.NewNopSettings(f.Type()), cfg, p.sink)
	require.NoError(t, err)
	require.NoError(t, p.attr.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.attr.Shutdown(context.WithoutCancel(t.Context()))) })
	return p
}

// gpuProcess is a process the simulated GPUs report.
type gpuProcess struct{ pid, gpu int }

// setProcesses writes the scenario: every GPU at deviceUtilization, with procs on them.
func (p *agentPage) setProcesses(procs []gpuProcess) {
	p.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "profile: dgxa100\nseed: 1\nsignals:\n  utilization: {constant: %d}\nprocesses:\n", deviceUtilization)
	for _, pr := range procs {
		fmt.Fprintf(&b, "  - {pid: %d, gpu: %d, memory_mib: 1000, sm: 50}\n", pr.pid, pr.gpu)
	}
	if len(procs) == 0 {
		b.WriteString("  []\n")
	}
	require.NoError(p.t, os.WriteFile(p.scenario, []byte(b.String()), 0o600))
}

// page is what one collection puts on the page of the Slurm jobs: task_gpu_percent by
// "<job>.<step>|<minor_number>" (ended: a NoRecordedValue point, the series' end) and
// slurm_job_info's labels by job.
type page struct {
	share, ended map[string]float64
	jobs         map[string]string
}

func (p *agentPage) collect() (page, error) {
	batch, err := gpureceivertest.SimulatedBatch(p.scenario)
	if err != nil {
		return page{}, err
	}
	p.sink.Reset()
	if err := p.attr.ConsumeMetrics(p.t.Context(), batch); err != nil {
		return page{}, err
	}
	got := page{share: map[string]float64{}, ended: map[string]float64{}, jobs: map[string]string{}}
	for _, md := range p.sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			res := rm.Resource().Attributes()
			job, isTask := res.Get("slurm_job_id")
			step, _ := res.Get("slurm_step")
			eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
				switch {
				case name == "task_gpu_percent" && isTask:
					minor, _ := dp.Attributes().Get("minor_number")
					key := job.Str() + "." + step.Str() + "|" + minor.Str()
					if dp.Flags().NoRecordedValue() {
						got.ended[key] = 0
					} else {
						got.share[key] = dp.DoubleValue()
					}
				case name == "slurm_job_info" && !dp.Flags().NoRecordedValue():
					a := dp.Attributes().AsRaw()
					got.jobs[fmt.Sprint(a["slurm_job_id"])] = fmt.Sprintf("%v %v %v %v %v %v", a["username"], a["job_name"], a["slurm_account"], a["slurm_partition"], a["slurm_array_job_id"], a["slurm_array_task_id"])
				}
			})
		}
	}
	return got, nil
}

func eachPoint(rm pmetric.ResourceMetrics, fn func(string, pmetric.NumberDataPoint)) {
	for j := 0; j < rm.ScopeMetrics().Len(); j++ {
		ms := rm.ScopeMetrics().At(j).Metrics()
		for k := 0; k < ms.Len(); k++ {
			if ms.At(k).Type() != pmetric.MetricTypeGauge {
				continue
			}
			dps := ms.At(k).Gauge().DataPoints()
			for l := 0; l < dps.Len(); l++ {
				fn(ms.At(k).Name(), dps.At(l))
			}
		}
	}
}

// wantPage is the page for the steps (by key, their GPUs), each step with a process on its
// first GPU but the idle ones: the device's utilization where its process is alone on the
// GPU, 0 for a step with no process (it holds its GPUs all the same); and one slurm_job_info
// a job.
func wantPage(steps map[string]step, gpus map[string][]int, idle map[string]bool) (map[string]float64, map[string]string) {
	share := map[string]float64{}
	jobs := map[string]string{}
	for key, s := range steps {
		for _, g := range gpus[key] {
			v := 0.0
			if !idle[key] && g == gpus[key][0] {
				v = deviceUtilization
			}
			share[key+"|"+strconv.Itoa(g)] = v
		}
		jobs[s.job] = fmt.Sprintf("%s %s %s %s %s %s", realslurm.User, s.name, s.account, realslurm.Partition, s.arrayJob, s.arrayTask)
	}
	return share, jobs
}

func diffPage(got page, share map[string]float64, jobs map[string]string) error {
	if !maps.Equal(got.share, share) {
		return fmt.Errorf("task_gpu_percent by step and GPU:\n got  %v\n want %v", sorted(got.share), sorted(share))
	}
	if !maps.Equal(got.jobs, jobs) {
		return fmt.Errorf("slurm_job_info:\n got  %v\n want %v", got.jobs, jobs)
	}
	return nil
}

func sorted(m map[string]float64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%g", k, v))
	}
	slices.Sort(out)
	return out
}

// startTaskReceiver is the agent's task receiver on the real node with slurm enabled, collecting
// every second into the sink it returns.
func startTaskReceiver(t *testing.T) *consumertest.MetricsSink {
	t.Helper()
	f := taskreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*taskreceiver.Config)
	cfg.CollectionInterval = time.Second
	cfg.InitialDelay = 0
	cfg.Slurm.Enabled = true
	cfg.InfiniBand.Enabled = false
	sink := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(t.Context(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.WithoutCancel(t.Context()))) })
	return sink
}

// stepTasks are the steps with a live task_mem_usage_byte in the task receiver's latest
// collection, by "<job>.<step>", with their username and job_name.
func stepTasks(sink *consumertest.MetricsSink) map[string]string {
	all := sink.AllMetrics()
	got := map[string]string{}
	if len(all) == 0 {
		return got
	}
	md := all[len(all)-1]
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := rm.Resource().Attributes().AsRaw()
		job, ok := res["slurm_job_id"]
		if !ok {
			continue
		}
		eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
			if name == "task_mem_usage_byte" && !dp.Flags().NoRecordedValue() {
				got[fmt.Sprintf("%v.%v", job, res["slurm_step"])] = fmt.Sprintf("%v %v", res["username"], res["job_name"])
			}
		})
	}
	return got
}
