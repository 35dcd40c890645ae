// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a platform query is expected to return on the monitored cluster.
type expectation int

const (
	// returnsData: the query must return series.
	returnsData expectation = iota
	// healthy: the alert's condition does not hold on the demo; the query must run and return
	// nothing, and probe (the series it selects) must return data.
	healthy
	// noProducer: a name that nothing in OpenPAI or in our contract produces any more (why
	// says which); it must run and return nothing.
	noProducer
)

type platformQuery struct {
	source string // which of OpenPAI's rules, dashboards, pages or reports has it
	query  string // verbatim; {{interval}}, $node, $job, $service_name, <host>, <i> as there
	expect expectation
	probe  string // healthy: the selector that must have data
	why    string // noProducer: the reason
}

// platformQueries are OpenPAI's queries, verbatim, as github.com/microsoft/pai has them at its
// last master (a95d9420e, 2022): its recording and alert rules (src/prometheus/deploy/recording,
// src/prometheus/deploy/alerting), its Grafana dashboards
// (src/grafana/deploy/grafana-configuration), its WebPortal (src/webportal/src/app) and its
// weekly cluster-usage report (src/alert-manager/src/cluster-utilization/send_alert.py).
var platformQueries = []platformQuery{
	{source: "recording rule node:gpu_utilization:count", query: `count(gpu_utilization) by (instance)`},
	{source: "recording rule node:nvidiasmi_utilization_gpu:count (2019-2020)", query: `count(nvidiasmi_utilization_gpu) by (instance)`},

	{
		source: "alert rule NvidiaSmiLatencyTooLarge", query: `histogram_quantile(0.95, sum(rate(cmd_nvidia_smi_latency_seconds_bucket[5m])) by (le, instance)) > 40`, expect: noProducer,
		why: "no nvidia-smi is run: the contract's cmd_nvml_latency_seconds replaces it (rule NvmlLatencyTooLarge); OpenPAI's could never fire (buckets end at 10 s)",
	},
	{source: "alert rule NvidiaSmiDoubleEccError", query: `nvidiasmi_ecc_error_count{type="double"} > 0`},
	{source: "alert rule NvidiaMemoryLeak", query: `nvidiasmi_memory_leak_count > 0`},
	{source: "alert rule NvidiaZombieProcess", query: `zombie_process_count{command="nvidia-smi"} > 0`},
	{source: "alert rule GpuUsedByExternalProcess", query: `gpu_used_by_external_process_count > 0`},
	{source: "alert rule GpuUsedByZombieContainer", query: `gpu_used_by_zombie_container_count > 0`},
	{source: "alert rule NodeGpuCountChanged", query: `node:gpu_utilization:count != on (instance) configured_gpu_count`},
	{
		source: "alert rule NodeGpuLowPerfState", query: `nvidiasmi_performance_state{clocks_throttle_reasons=""} >= 8`, expect: healthy,
		probe: `nvidiasmi_performance_state{clocks_throttle_reasons=""}`,
	},
	{source: "alert rule PaiJobsZombie", query: `zombie_container_count > 0`},
	{source: "alert rule PaiJobPending", query: `pai_job_pod_count{pod_bound="true", phase="pending"} > 0`},
	{source: "alert rule k8sApiServerNotOk", query: `k8s_api_server_count{error!="ok"} > 0`, expect: healthy, probe: `k8s_api_server_count{error="ok"}`},
	{
		source: "alert rule k8sDockerDaemonNotOk", query: `docker_daemon_count{error!="ok"} > 0`, expect: noProducer,
		why: "docker_daemon_count is not in the contract: the agent reads cgroups and the kubelet, not docker (OpenPAI's summary also named a label that no longer existed)",
	},
	{
		source: "alert rule NodeFilesystemUsage", query: `node_filesystem_avail_bytes{mountpoint=~"/host-root.*", device=~"/dev.*"} / node_filesystem_size_bytes * 100 <= 20`, expect: noProducer,
		why: "/host-root was where OpenPAI's node-exporter container saw the host; the task receiver reports the host's own mount points (rule NodeFilesystemUsage matches those)",
	},
	{
		source: "alert rule NodeMemoryUsage", query: `(node_memory_MemTotal_bytes - (node_memory_MemFree_bytes+node_memory_Buffers_bytes+node_memory_Cached_bytes )) / node_memory_MemTotal_bytes * 100 > 95`, expect: healthy,
		probe: `node_memory_MemTotal_bytes`,
	},
	// The fixture host's /proc/stat does not move, so its CPUs read as never idle.
	{source: "alert rule NodeCPUUsage", query: `(100 - (avg by (instance) (irate(node_cpu_seconds_total{mode="idle"}[5m])) * 100)) > 98`},
	{source: "alert rule NodeDiskPressure", query: `pai_node_count{disk_pressure="true"} > 0`},
	{
		source: "alert rule NodeOutOfDisk", query: `pai_node_count{out_of_disk="true"} > 0`, expect: noProducer,
		why: "Kubernetes removed the OutOfDisk node condition (and OpenPAI's Go watchdog never exported it); replaced by NodeMemoryPressure and NodePIDPressure",
	},
	{source: "alert rule NodeNotReady", query: `pai_node_count{ready!="true"} > 0`},
	{
		source: "alert rule AzureAgentConsumeTooMuchMem", query: `process_mem_usage_byte{cmd=~".*om[is]agent.*"} > 1073741824 # 1G`, expect: healthy,
		probe: `process_mem_usage_byte`,
	},
	{source: "alert rule PaiServicePodNotRunning", query: `pai_pod_count{phase!="running"} > 0`},
	{source: "alert rule PaiServicePodNotReady", query: `pai_pod_count{phase="running", ready="false"} > 0`},
	{
		source: "alert rule WatchdogNotUp", query: `up{pai_service_name="watchdog"} != 1`, expect: healthy,
		probe: `up{job="otelcol-gpu-gateway"}`,
	},
	{source: "alert rule JobExporterHangs", query: `rate(collector_iteration_count_total[10m]) == 0`, expect: healthy, probe: `collector_iteration_count_total`},
	{
		source: "alert rule PAIJobGpuPercentLowerThan0_3For1h", query: `avg(task_gpu_percent{virtual_cluster=~"default"}) by (job_name, username) < 0.3`, expect: healthy,
		probe: `task_gpu_percent{virtual_cluster=~"default"}`,
	},

	{source: "Grafana ClusterView GPU allocation", query: `100 * (sum(yarn_node_gpu_total) - sum(yarn_node_gpu_available)) / sum(yarn_node_gpu_total)`, expect: noProducer, why: yarn},
	{source: "Grafana ClusterView", query: `avg(yarn_nodes_active)`, expect: noProducer, why: yarn},
	{source: "Grafana ClusterView", query: `count(node_uname_info)`},
	{source: "Grafana ClusterView", query: `sum(yarn_node_gpu_total) - sum(yarn_node_gpu_available)`, expect: noProducer, why: yarn},
	{source: "Grafana ClusterView", query: `sum(yarn_node_gpu_available)`, expect: noProducer, why: yarn},
	{source: "Grafana ClusterView CPU", query: `avg ((sum by (instance) (idelta(node_cpu_seconds_total{}[{{interval}}s])) > bool 0) * (100 - (avg by (instance)(irate(node_cpu_seconds_total{mode="idle"}[{{interval}}s])) * 100)))`},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_MemTotal_bytes) - sum(node_memory_MemFree_bytes) - sum(node_memory_Buffers_bytes) - sum(node_memory_Cached_bytes)`},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_MemFree_bytes)`},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_Buffers_bytes) + sum(node_memory_Cached_bytes)`},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="physical_total"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="physical_available"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="committed"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="commit_limit"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="system_cache"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `sum(node_memory_bytes{type="kernel_paged"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView memory", query: `(node_memory_bytes{type="kernel_non_paged"})`, expect: noProducer, why: windowsMemory},
	{source: "Grafana ClusterView network", query: `sum(irate(node_network_receive_bytes_total{device!~"lo"}[{{interval}}s]))`},
	{source: "Grafana ClusterView network", query: `sum(irate(node_network_transmit_bytes_total{device!~"lo"}[{{interval}}s]))`},
	{source: "Grafana ClusterView disk", query: `sum(irate(node_disk_read_bytes_total[{{interval}}s]))`},
	{source: "Grafana ClusterView disk", query: `sum(irate(node_disk_written_bytes_total[{{interval}}s]))`},
	{source: "Grafana ClusterView disk", query: `sum(irate(node_disk_other_bytes_total[{{interval}}s]))`, expect: noProducer, why: noProducerInPAI},
	{source: "Grafana ClusterView GPU", query: `avg(gpu_utilization)`},
	{source: "Grafana ClusterView GPU", query: `avg(gpu_mem_utilization)`},

	{source: "Grafana NodeView CPU", query: `(sum by (instance) (idelta(node_cpu_seconds_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s])) > bool 0) * (100 - (avg by (instance)(irate(node_cpu_seconds_total{mode="idle",instance=~"$node(:[0-9]*)?$"}[{{interval}}s])) * 100))`},
	{source: "Grafana NodeView memory", query: `node_memory_MemTotal_bytes{instance=~'$node(:[0-9]*)?$'} - node_memory_MemFree_bytes - node_memory_Buffers_bytes - node_memory_Cached_bytes`},
	{source: "Grafana NodeView memory", query: `node_memory_MemFree_bytes{instance=~'$node(:[0-9]*)?$'}`},
	{source: "Grafana NodeView memory", query: `node_memory_Buffers_bytes{instance=~'$node(:[0-9]*)?$'} + node_memory_Cached_bytes`},
	{source: "Grafana NodeView memory", query: `node_memory_bytes{type="physical_total", instance=~'$node(:[0-9]*)?$'}`, expect: noProducer, why: windowsMemory},
	{source: "Grafana NodeView network", query: `sum(irate(node_network_receive_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]))`},
	{source: "Grafana NodeView network", query: `sum(irate(node_network_transmit_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]))`},
	{source: "Grafana NodeView disk", query: `sum(irate(node_disk_read_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]))`},
	{source: "Grafana NodeView disk", query: `sum(irate(node_disk_written_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]))`},
	{source: "Grafana NodeView disk", query: `sum(irate(node_disk_other_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]))`, expect: noProducer, why: noProducerInPAI},
	{source: "Grafana NodeView GPU", query: `avg(gpu_utilization{instance=~"$node(:[0-9]*)?$"})`},
	{source: "Grafana NodeView GPU", query: `avg(gpu_mem_utilization{instance=~"$node(:[0-9]*)?$"})`},
	{source: "Grafana NodeView GPU", query: `configured_gpu_count{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana gpu.js", query: `gpu_utilization{instance="<host>",minor_number="<i>"}`},
	{source: "Grafana gpu.js", query: `gpu_mem_utilization{instance="<host>",minor_number="<i>"}`},

	{source: "Grafana JobLevelMetrics", query: `avg by (job_name)(task_cpu_percent{job_name=~"$job"})`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name)(irate(task_cpu_seconds_total{job_name=~"$job"}[{{interval}}s])) * 100`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (task_mem_usage_byte{ job_name=~"$job"})`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (task_net_in_byte{job_name=~"$job"})`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (task_net_out_byte{job_name=~"$job"})`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (irate(task_network_receive_bytes_total{job_name=~"$job"}[{{interval}}s]))`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (irate(task_network_transmit_bytes_total{job_name=~"$job"}[{{interval}}s]))`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (irate(task_block_in_byte{ job_name=~"$job"}[{{interval}}s]))`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (irate(task_block_out_byte{ job_name=~"$job"}[{{interval}}s]))`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (irate(task_block_other_byte{ job_name=~"$job"}[{{interval}}s]))`, expect: noProducer, why: noProducerInPAI},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name)(task_gpu_percent{job_name=~"$job"})`},
	{source: "Grafana JobLevelMetrics", query: `avg by (job_name) (task_gpu_mem_percent{job_name=~"$job"})`},
	{source: "Grafana TaskLevelMetrics", query: `avg by (job_name, role_name,task_index, minor_number)(task_gpu_percent{job_name=~"$job"})`},
	{source: "Grafana TaskLevelMetrics", query: `avg by (job_name, role_name, task_index, minor_number) (task_gpu_mem_percent{job_name=~"$job"})`},

	{source: "Grafana Tasks in Node", query: `task_cpu_percent{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana Tasks in Node", query: `irate(task_cpu_seconds_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s]) * 100`},
	{source: "Grafana Tasks in Node", query: `task_mem_usage_byte{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana Tasks in Node", query: `task_net_in_byte{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana Tasks in Node", query: `task_net_out_byte{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana Tasks in Node", query: `irate(task_network_receive_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s])`},
	{source: "Grafana Tasks in Node", query: `irate(task_network_transmit_bytes_total{instance=~"$node(:[0-9]*)?$"}[{{interval}}s])`},
	{source: "Grafana Tasks in Node", query: `irate(task_block_in_byte{instance=~"$node(:[0-9]*)?$"}[300s])`},
	{source: "Grafana Tasks in Node", query: `irate(task_block_out_byte{instance=~"$node(:[0-9]*)?$"}[300s])`},
	{source: "Grafana Tasks in Node", query: `task_gpu_percent{instance=~"$node(:[0-9]*)?$"}`},
	{source: "Grafana Tasks in Node", query: `task_gpu_mem_percent{instance=~"$node(:[0-9]*)?$"}`},

	{source: "Grafana PaiServiceMetrics", query: `service_cpu_percent{name="$service_name"}`},
	{source: "Grafana PaiServiceMetrics", query: `service_mem_usage_byte{name="$service_name"}`},
	{source: "Grafana PaiServiceMetrics", query: `service_net_in_byte{name="$service_name"}`},
	{source: "Grafana PaiServiceMetrics", query: `service_net_out_byte{name="$service_name"}`},
	{source: "Grafana PaiServiceMetrics", query: `irate(service_block_in_byte{name="$service_name"}[{{interval}}s])`},
	{source: "Grafana PaiServiceMetrics", query: `irate(service_block_out_byte{name="$service_name"}[{{interval}}s])`},

	{source: "WebPortal hardware", query: `100 - (avg by (instance)(irate(node_cpu_seconds_total{mode="idle"}[300s])) * 100)`},
	{source: "WebPortal hardware", query: `node_memory_MemTotal_bytes - node_memory_MemFree_bytes - node_memory_Buffers_bytes - node_memory_Cached_bytes`},
	{source: "WebPortal hardware", query: `node_memory_MemTotal_bytes`},
	{source: "WebPortal hardware", query: `avg by (instance)(gpu_utilization)`},
	{source: "WebPortal hardware", query: `avg by (instance)(gpu_mem_utilization)`},
	{source: "WebPortal hardware", query: `sum by (instance)(rate(node_disk_read_bytes_total[300s]))`},
	{source: "WebPortal hardware", query: `sum by (instance)(rate(node_disk_written_bytes_total[300s]))`},
	{source: "WebPortal hardware", query: `sum by (instance)(rate(node_network_receive_bytes_total[300s]))`},
	{source: "WebPortal node list", query: `node_uname_info`},
	{source: "WebPortal home, low GPU utilization jobs", query: `avg(avg_over_time(task_gpu_percent[10m]) < 10) by (job_name)`},
	{source: "WebPortal home (2019)", query: `sum(yarn_node_gpu_total)`, expect: noProducer, why: yarn},
	{source: "WebPortal home (2019)", query: `yarn_node_gpu_available`, expect: noProducer, why: yarn},

	{source: "weekly report", query: `avg(avg_over_time(nvidiasmi_utilization_gpu[7d]))`},
	{source: "weekly report", query: `avg by (job_name) (avg_over_time(task_gpu_percent[7d]))`},
	{source: "weekly report", query: `sum by (job_name) (count_over_time(task_gpu_percent[7d]))`},
	{source: "weekly report", query: `(sum by (username) (sum_over_time(task_gpu_percent[7d]))) / (sum by (username) (count_over_time(task_gpu_percent[7d])*100)) * 100`},
}

const (
	yarn            = "YARN-era yarn-exporter metric (OpenPAI ≤ v0.14); Kubernetes GPU capacity is k8s_node_gpu_total/available"
	windowsMemory   = "no component of OpenPAI produced node_memory_bytes{type}: Windows-style names pushed by an out-of-tree agent"
	noProducerInPAI = "added to OpenPAI's dashboards in 2021 with no producer in OpenPAI; not in the contract"
)

// TestOpenPAIQueries runs the platform's rules and queries, unchanged, on the monitored cluster
// (make demo's agent with its faults, the k8s_watchdog on a real API server, OpenPAI's recording
// rule loaded from deploy/prometheus/rules).
func TestOpenPAIQueries(t *testing.T) {
	mc := startMonitoredCluster(t)
	require.Len(t, mc.labelValues(t, "node_cpu_seconds_total", "instance"), 1)
	jobs := mc.labelValues(t, "task_mem_usage_byte", "job_name")
	require.Contains(t, jobs, "carol~llama-ft")
	fill := platformFill(t, mc)

	for _, pq := range platformQueries {
		t.Run(pq.source+": "+pq.query, func(t *testing.T) {
			q := fill.Replace(pq.query)
			n, err := mc.query(q)
			require.NoError(t, err, "the query does not run: %s", q)
			switch pq.expect {
			case returnsData:
				assert.Positive(t, n, "no data: %s", q)
			case healthy:
				assert.Zero(t, n, "the condition holds on the demo: %s", q)
				p, err := mc.query(pq.probe)
				require.NoError(t, err)
				assert.Positive(t, p, "the series the query selects are missing: %s", pq.probe)
			case noProducer:
				require.NotEmpty(t, pq.why)
				assert.Zero(t, n, "has a producer now: %s", q)
			}
		})
	}
}

// platformFill fills the platform queries' placeholders as OpenPAI's pages would, from mc's
// data: the first node, the job alice~resnet50, the first platform service.
func platformFill(t *testing.T, mc monitoredCluster) *strings.Replacer {
	t.Helper()
	instances := mc.labelValues(t, "node_cpu_seconds_total", "instance")
	require.NotEmpty(t, instances)
	services := mc.labelValues(t, "service_cpu_percent", "name")
	require.NotEmpty(t, services)
	return strings.NewReplacer("{{interval}}", "60", "$node", instances[0], "$job", "alice~resnet50",
		"$service_name", services[0], "<host>", instances[0], "<i>", "0")
}
