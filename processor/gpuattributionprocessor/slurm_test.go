// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

const slurmScenario = "testdata/scenarios/slurm.yaml"

// slurmd is the number of the Slinky slurmd pod of the Slurm test node.
const slurmd = 20

// v2Step is a step's task cgroup as Slurm's cgroup/v2 makes it (internal/slurm/SOURCE.md), below
// prefix: "" on bare metal, a container's cgroup where slurmd runs in a pod (Slinky: its
// cgroup.conf's IgnoreSystemd=yes makes slurmd lay its tree out under its own cgroup namespace's
// root, the container's cgroup on the host).
func v2Step(prefix, job, step string) string {
	return prefix + "/system.slice/slurmstepd.scope/job_" + job + "/step_" + step + "/user/task_0"
}

func slurmEnv(job, name, account string, extra ...string) []string {
	return append([]string{
		"SLURM_JOB_ID=" + job, "SLURM_JOB_USER=alice", "SLURM_JOB_NAME=" + name,
		"SLURM_JOB_ACCOUNT=" + account, "SLURM_JOB_PARTITION=gpu", "CUDA_VISIBLE_DEVICES=0",
	}, extra...)
}

func stepTask(path string, pid int, env []string) hostfixture.Container {
	return hostfixture.Container{CgroupPath: path, Processes: []hostfixture.Process{{PID: pid, Comm: "python3", Cmdline: []string{"python3"}, Env: env, State: "S", RSSPages: 100}}}
}

// slurmHost is the node of testdata/scenarios/slurm.yaml, cgroup v2.
func slurmHost() hostfixture.Host {
	slinky := pod(slurmd, &hostfixture.PodLogs{Namespace: "slurm", Name: "slurm-worker-gpu-0", Container: "slurmd"}, []int{1500}, "HOME=/root")
	slinkyCgroup := slinky.Containers[0].CgroupPath
	return hostfixture.Host{
		CgroupVersion: 2,
		Processes:     []hostfixture.Process{{PID: 1601, Comm: "burn", Cmdline: []string{"/opt/burn"}, State: "S", RSSPages: 100}},
		Pods:          []hostfixture.Pod{slinky},
		Containers: []hostfixture.Container{
			stepTask(v2Step("", "42", "batch"), 1101, slurmEnv("42", "train", "physics", "SLURM_JOB_GPUS=0,1")),
			stepTask(v2Step("", "43", "0"), 1201, slurmEnv("43", "sweep", "physics", "SLURM_STEP_GPUS=2", "SLURM_JOB_GPUS=2", "SLURM_ARRAY_JOB_ID=40", "SLURM_ARRAY_TASK_ID=3")),
			stepTask(v2Step("", "44", "0"), 1301, slurmEnv("44", "notebook", "bio", "SLURM_STEP_GPUS=2")),
			stepTask(v2Step("", "45", "0"), 1401, nil),
			// A GPU list that is not Slurm's: counted, the step keeps its fields and its process's GPU.
			stepTask(v2Step("", "46", "0"), 1701, slurmEnv("46", "odd", "bio", "SLURM_STEP_GPUS=GPU-1")),
			stepTask(v2Step(slinkyCgroup, "50", "0"), 1501, slurmEnv("50", "slinky", "chem", "SLURM_STEP_GPUS=4")),
			// slurmstepd of job 42's batch step: a step's, but not one of its tasks.
			{CgroupPath: "/system.slice/slurmstepd.scope/job_42/step_batch/slurm", Processes: []hostfixture.Process{{PID: 1100, Comm: "slurmstepd", Cmdline: []string{"slurmstepd: [42.batch]"}, State: "S", RSSPages: 100}}},
		},
	}
}

func withSources(sources ...Source) envOption {
	return func(c *Config) { c.AllocationSources = sources }
}

func withJobMapping(dir string) envOption {
	return func(c *Config) { c.Slurm.JobMappingDir = dir }
}

// stepPoints indexes task_gpu_percent's points by "<slurm_job_id>.<slurm_step>|<minor_number>".
func stepPoints(md pmetric.Metrics) map[string]point {
	out := map[string]point{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		job, ok := rm.Resource().Attributes().Get("slurm_job_id")
		if !ok {
			continue
		}
		step, _ := rm.Resource().Attributes().Get("slurm_step")
		one := pmetric.NewMetrics()
		rm.CopyTo(one.ResourceMetrics().AppendEmpty())
		for k, p := range points(one, "slurm_job_id", "minor_number")["task_gpu_percent"] {
			_, minor, _ := strings.Cut(k, "|")
			out[job.Str()+"."+step.Str()+"|"+minor] = p
		}
	}
	return out
}

// gpuBatchWithout is the scenario's batch without the points of process pid (it exited).
func gpuBatchWithout(t *testing.T, scenario, pid string) pmetric.Metrics {
	md := gpuBatch(t, scenario)
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Type() != pmetric.MetricTypeGauge {
					continue
				}
				ms.At(k).Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
					v, ok := dp.Attributes().Get("pid")
					return ok && v.AsString() == pid
				})
			}
		}
	}
	return md
}

// TestSlurm: each step holds the GPUs its environment names (by Slurm's index) with its share,
// an idle one included; a step whose environment cannot be read holds the GPU its process is on;
// a job of the job-mapping files no step of which runs here holds its GPU by its id alone; a
// step below the slurmd pod's container is the job's, not the pod's; one slurm_job_info a job.
func TestSlurm(t *testing.T) {
	batch := gpuBatch(t, slurmScenario)
	e := newTestEnv(t, slurmHost(), nil, withSources(SourceSlurm, SourceProcess), withJobMapping("/dcgm-jobs"))
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "dcgm-jobs"), 0o755))
	// dcgm-exporter's format: a file per GPU (DCGM's id), one job id a line.
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "dcgm-jobs", "0"), []byte("42\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "dcgm-jobs", "6"), []byte("77\n"), 0o600))
	e.refresh()
	out := e.process(batch)
	device := deviceValues(batch)

	util := stepPoints(out)
	assert.ElementsMatch(t, []string{"42.batch|0", "42.batch|1", "43.0|2", "44.0|2", "45.0|3", "46.0|5", "50.0|4", "77.unknown|6"}, keys(util))
	assert.Equal(t, device["0"].util, util["42.batch|0"].value, "a GPU a step holds alone: the device's")
	assert.Equal(t, device["1"].util, util["42.batch|1"].value, "the job's idle GPU: held all the same")
	assert.InDelta(t, device["2"].util*30/40, util["43.0|2"].value, 1e-9, "two jobs on one GPU: split by their processes' SM")
	assert.InDelta(t, device["2"].util*10/40, util["44.0|2"].value, 1e-9)

	labels := map[string]map[string]any{}
	for i := 0; i < out.ResourceMetrics().Len(); i++ {
		attrs := out.ResourceMetrics().At(i).Resource().Attributes()
		if job, ok := attrs.Get("slurm_job_id"); ok {
			step, _ := attrs.Get("slurm_step")
			labels[job.Str()+"."+step.Str()] = attrs.AsRaw()
		}
	}
	assert.Equal(t, map[string]any{
		"node_name": "gpu-node-07", "simulated": "true", "slurm_job_id": "42", "slurm_step": "batch",
		"username": "alice", "job_name": "train", "role_name": "unknown", "task_index": "unknown",
		"job_instance_id": "unknown", "virtual_cluster": "unknown",
	}, labels["42.batch"], "a step's task labels; no container_id, pod or namespace")
	assert.Equal(t, "unknown", labels["45.0"]["username"], "a step known by its cgroup path only")
	assert.Equal(t, "unknown", labels["77.unknown"]["job_name"], "a job of the job-mapping files: its id only")
	assert.Equal(t, "slinky", labels["50.0"]["job_name"], "below the slurmd pod's container: the job, not the pod")
	assert.NotContains(t, labels["50.0"], "pod_name")

	byGPU := points(out, "node_name", "minor_number", "pid", "slurm_job_id", "username", "job_name", "slurm_account", "slurm_partition", "slurm_array_job_id", "slurm_array_task_id", "source")
	assert.Equal(t, map[string]point{"gpu-node-07|7|1601||||||||": {value: 1}}, byGPU["gpu_used_by_external_process_count"], "only the host process is external")
	assert.Equal(t, map[string]point{
		"gpu-node-07|||42|alice|train|physics|gpu|||":         {value: 1},
		"gpu-node-07|||43|alice|sweep|physics|gpu|40|3|":      {value: 1},
		"gpu-node-07|||44|alice|notebook|bio|gpu|||":          {value: 1},
		"gpu-node-07|||45|unknown|unknown|unknown|unknown|||": {value: 1},
		"gpu-node-07|||46|alice|odd|bio|gpu|||":               {value: 1},
		"gpu-node-07|||50|alice|slinky|chem|gpu|||":           {value: 1},
		"gpu-node-07|||77|unknown|unknown|unknown|unknown|||": {value: 1},
	}, byGPU["slurm_job_info"], "one per job")
	assert.Equal(t, 1.0, byGPU["gpu_attribution_source_errors_total"]["gpu-node-07||||||||||slurm"].value, "job 46's GPU list")

	// Job 44 ends: its series and its slurm_job_info end at the next batch after the refresh.
	require.NoError(t, os.RemoveAll(filepath.Join(e.root, "sys/fs/cgroup", "system.slice/slurmstepd.scope/job_44")))
	require.NoError(t, os.RemoveAll(filepath.Join(e.root, "proc", "1301")))
	e.refresh()
	ended := e.process(gpuBatchWithout(t, slurmScenario, "1301"))
	assert.Equal(t, point{absent: true}, stepPoints(ended)["44.0|2"], "the ended job's series ends")
	assert.Equal(t, device["2"].util, stepPoints(ended)["43.0|2"].value, "the other now holds it alone")
	info := points(ended, "node_name", "slurm_job_id")["slurm_job_info"]
	assert.Equal(t, point{absent: true}, info["gpu-node-07|44"], "its slurm_job_info ends with its last step")
	assert.Equal(t, point{value: 1}, info["gpu-node-07|42"])
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestSlurmOnKubernetes: Slinky's slurmd pod holds the GPUs the kubelet gave it for Slurm to hand
// out. With slurm asked first, a GPU a step of it holds is the job's and the pool's idle GPU the
// pod's; with pod_resources first (or no slurm source), the kubelet's allocation decides.
func TestSlurmOnKubernetes(t *testing.T) {
	batch := gpuBatch(t, slurmScenario)
	ids := idsOf(batch)
	srv, err := podresourcestest.NewServer(filepath.Join(socketDir(t), "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetPods(podresourcestest.Pod("slurm", "slurm-worker-gpu-0", podresourcestest.Container("slurmd", gpuResource, ids[4].UUID, ids[5].UUID)))

	for _, tc := range []struct {
		sources    []Source
		gpu4, gpu5 string
	}{
		{[]Source{SourceSlurm, SourcePodResources, SourceProcess}, "slinky", "slurm/slurm-worker-gpu-0"},
		{[]Source{SourcePodResources, SourceSlurm, SourceProcess}, "slurm/slurm-worker-gpu-0", "slurm/slurm-worker-gpu-0"},
		{[]Source{SourcePodResources, SourceProcess}, "slurm/slurm-worker-gpu-0", "slurm/slurm-worker-gpu-0"},
	} {
		t.Run(fmt.Sprint(tc.sources), func(t *testing.T) {
			e := newTestEnv(t, slurmHost(), srv, withSources(tc.sources...))
			util := points(e.process(batch), "job_name", "minor_number")["task_gpu_percent"]
			holders := map[string][]string{}
			for k := range util {
				job, minor, _ := strings.Cut(k, "|")
				holders[minor] = append(holders[minor], job)
			}
			assert.Equal(t, []string{tc.gpu4}, holders["4"])
			assert.Equal(t, []string{tc.gpu5}, holders["5"])
		})
	}
}

// TestSlurmGPUsByDeviceMinor: Slurm's GPU indexes are device minors (/dev/nvidia<minor>), joined
// to GPUs by the NVIDIA driver's files, whose order differs from NVML's (minor_number) here.
func TestSlurmGPUsByDeviceMinor(t *testing.T) {
	batch := gpuBatch(t, slurmScenario)
	ids := idsOf(batch)
	host := slurmHost()
	for i := range 8 {
		// /dev/nvidia<i> is NVML's GPU 7-i.
		host.NvidiaGPUs = append(host.NvidiaGPUs, hostfixture.NvidiaGPU{BusID: fmt.Sprintf("0000:%02x:00.0", 0x10+i), Minor: i, UUID: ids[7-i].UUID})
	}
	e := newTestEnv(t, host, nil, withSources(SourceSlurm))
	util := stepPoints(e.process(batch))
	assert.Contains(t, util, "42.batch|7", "SLURM_JOB_GPUS=0,1: /dev/nvidia0 and /dev/nvidia1")
	assert.Contains(t, util, "42.batch|6")
	assert.Contains(t, util, "42.batch|0", "and the GPU its process is on")
	assert.NotContains(t, util, "42.batch|1", "not NVML's GPU 1")
}

// TestSlurmSeriesPerNode measures what the slurm source puts on a node's page with 8 GPUs
// shared by 64 single-step jobs (8 a GPU, each with one process on it): the numbers in
// docs/metrics.md's Slurm section.
func TestSlurmSeriesPerNode(t *testing.T) {
	const gpus, jobs = 8, 64
	host := hostfixture.Host{CgroupVersion: 2}
	var scenario strings.Builder
	scenario.WriteString("profile: dgxa100\nseed: 5\nsignals:\n  utilization: {constant: 50}\nprocesses:\n")
	for j := range jobs {
		job, pid, gpu := strconv.Itoa(1000+j), 20000+j, j%gpus
		host.Containers = append(host.Containers, stepTask(v2Step("", job, "batch"), pid,
			slurmEnv(job, "job"+job, "acct"+strconv.Itoa(j%4), "SLURM_JOB_GPUS="+strconv.Itoa(gpu))))
		fmt.Fprintf(&scenario, "  - {pid: %d, gpu: %d, memory_mib: 1000, sm: %d}\n", pid, gpu, 1+j)
	}
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(path, []byte(scenario.String()), 0o600))
	e := newTestEnv(t, host, nil, withSources(SourceSlurm, SourceProcess))
	out := e.process(gpuBatch(t, path))

	series := map[string]int{}
	total := 0
	for i := 0; i < out.ResourceMetrics().Len(); i++ {
		eachGauge(out.ResourceMetrics().At(i), func(name string, n int) {
			series[name] += n
			total += n
		})
	}
	t.Logf("series per node, %d GPUs, %d jobs: %v, %d in all", gpus, jobs, series, total)
	assert.Equal(t, map[string]int{
		"task_gpu_percent": jobs, "task_gpu_mem_percent": jobs, "slurm_job_info": jobs,
		"gpu_attribution_source_errors_total": 6, "zombie_container_count": 2,
	}, series)
}

// eachGauge calls fn with each metric's name and number of points.
func eachGauge(rm pmetric.ResourceMetrics, fn func(name string, points int)) {
	for j := 0; j < rm.ScopeMetrics().Len(); j++ {
		ms := rm.ScopeMetrics().At(j).Metrics()
		for k := 0; k < ms.Len(); k++ {
			if m := ms.At(k); m.Type() == pmetric.MetricTypeGauge {
				fn(m.Name(), m.Gauge().DataPoints().Len())
			} else {
				fn(m.Name(), m.Sum().DataPoints().Len())
			}
		}
	}
}

// TestSlurmJobMappingMIG: a job-mapping file named <gpu>.<gpu instance> gives the job that MIG
// slice, not its GPU; a file naming no GPU of the node, and one not named as dcgm-exporter names
// them, give nothing.
func TestSlurmJobMappingMIG(t *testing.T) {
	batch := gpuBatch(t, scenario) // node.yaml: GPU 3 in MIG mode
	gpus := readGPUs(batch)
	var mig migReading
	for i := range gpus {
		if gpus[i].minor == "3" {
			mig = gpus[i].migs[0]
		}
	}
	require.NotEmpty(t, mig.gi)
	e := newTestEnv(t, hostfixture.Host{CgroupVersion: 2}, nil, withSources(SourceSlurm), withJobMapping("/dcgm-jobs"))
	dir := filepath.Join(e.root, "dcgm-jobs")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, content := range map[string]string{"3." + mig.gi: "90\n", "12": "91\n", "gpu5": "92\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	e.refresh()
	mem := points(e.process(batch), "slurm_job_id", "minor_number", "mig_uuid")["task_gpu_mem_percent"]
	assert.Equal(t, []string{"90|3|" + mig.uuid}, keys(mem))
	assert.InDelta(t, float64(mig.used)/float64(mig.total)*100, mem["90|3|"+mig.uuid].value, 1e-9, "the slice's memory")
}
