// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

// slurmStepHost is a cgroup v2 node with two Slurm steps as cgroup/v2 lays them out: each step's
// directory (whose statistics aggregate its tasks') and its task_0 with the step's process; job
// 43's environment cannot be read.
func slurmStepHost() hostfixture.Host {
	stepDir := func(job, step string) string {
		return "/system.slice/slurmstepd.scope/job_" + job + "/step_" + step
	}
	task := func(job, step string, pid int, env []string) hostfixture.Container {
		return hostfixture.Container{CgroupPath: stepDir(job, step) + "/user/task_0", Processes: []hostfixture.Process{
			{PID: pid, Comm: "python3", Cmdline: []string{"python3"}, Env: env, State: "S", RSSPages: 100},
		}}
	}
	return hostfixture.Host{
		CgroupVersion: 2,
		Containers: []hostfixture.Container{
			{CgroupPath: stepDir("42", "0"), CPUUsec: 2_000_000, MemUsage: 3 << 30},
			task("42", "0", 700, []string{"SLURM_JOB_ID=42", "SLURM_JOB_USER=alice", "SLURM_JOB_NAME=train", "SLURM_STEP_GPUS=0"}),
			{CgroupPath: stepDir("43", "batch"), CPUUsec: 1_000_000, MemUsage: 1 << 30},
			task("43", "batch", 710, nil),
		},
	}
}

// stepSeries is a metric's points by "<slurm_job_id>.<slurm_step> <username> <job_name>".
func stepSeries(md pmetric.Metrics, metric string) map[string]float64 {
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes().AsRaw()
		job, ok := attrs["slurm_job_id"]
		if !ok {
			continue
		}
		key := job.(string) + "." + attrs["slurm_step"].(string) + " " + attrs["username"].(string) + " " + attrs["job_name"].(string)
		ms := rm.ScopeMetrics().At(0).Metrics()
		for k := 0; k < ms.Len(); k++ {
			if m := ms.At(k); m.Name() == metric && m.Type() == pmetric.MetricTypeGauge {
				if dps := m.Gauge().DataPoints(); !dps.At(0).Flags().NoRecordedValue() {
					out[key] = float64(dps.At(0).IntValue()) + dps.At(0).DoubleValue()
				} else {
					out[key] = -1 // ended
				}
			}
		}
	}
	return out
}

// TestSlurmSteps: with slurm enabled each step is a task, its usage its step cgroup's, labeled
// as gpu_attribution labels its GPUs; a step whose environment cannot be read is known by its
// path; a step that ends, ends its series. Without slurm, no step is a task.
func TestSlurmSteps(t *testing.T) {
	root := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfixture.Write(root, slurmStepHost()))

	off := scrapeOnce(t, newStartedScraper(t, testConfig(root)))
	assert.Empty(t, stepSeries(off, "task_mem_usage_byte"), "slurm not enabled: no step is a task")

	cfg := testConfig(root)
	cfg.Slurm.Enabled = true
	s := newStartedScraper(t, cfg)
	assert.Equal(t, map[string]float64{
		"42.0 alice train":         3 << 30,
		"43.batch unknown unknown": 1 << 30,
	}, stepSeries(scrapeOnce(t, s), "task_mem_usage_byte"))

	advance(s, 10*time.Second)
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_0/cpu.stat"), []byte("usage_usec 7000000\n"), 0o600))
	second := scrapeOnce(t, s)
	assert.InDelta(t, 50.0, stepSeries(second, "task_cpu_percent")["42.0 alice train"], 1e-9, "5 s of CPU in 10 s")
	assert.NotContains(t, stepSeries(second, "task_network_receive_bytes_total"), "42.0 alice train", "a step's network is the node's")

	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_43")))
	advance(s, 10*time.Second)
	ended := stepSeries(scrapeOnce(t, s), "task_mem_usage_byte")
	assert.Equal(t, -1.0, ended["43.batch unknown unknown"], "the ended step's series ends")
	assert.Equal(t, float64(3<<30), ended["42.0 alice train"])
}

// TestSlurmStepSeries measures the task_* series of one Slurm step (cgroup v2, second
// collection: with the rates): the number in docs/metrics.md's Slurm section.
func TestSlurmStepSeries(t *testing.T) {
	root := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfixture.Write(root, slurmStepHost()))
	cfg := testConfig(root)
	cfg.Slurm.Enabled = true
	s := newStartedScraper(t, cfg)
	scrapeOnce(t, s)
	advance(s, 10*time.Second)
	md := scrapeOnce(t, s)
	var names []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if step, ok := rm.Resource().Attributes().Get("slurm_step"); ok && step.Str() == "0" {
			ms := rm.ScopeMetrics().At(0).Metrics()
			for k := 0; k < ms.Len(); k++ {
				names = append(names, ms.At(k).Name())
			}
		}
	}
	assert.ElementsMatch(t, []string{
		"task_cpu_percent", "task_cpu_seconds_total", "task_mem_usage_byte", "task_mem_limit_byte",
		"task_mem_usage_percent", "task_block_in_byte", "task_block_out_byte",
	}, names, "one series each a step")
}
