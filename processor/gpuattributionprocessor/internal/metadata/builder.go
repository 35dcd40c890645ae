// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"

import (
	"time"

	"go.opentelemetry.io/collector/filter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
)

// NewMetricsBuilder is what mdatagen (v0.159.0) generates for receivers, scrapers and connectors
// only, although it generates the builder and its tests for a processor that declares metrics.
func NewMetricsBuilder(mbc MetricsBuilderConfig, settings processor.Settings, options ...MetricBuilderOption) *MetricsBuilder {
	mb := &MetricsBuilder{
		config:                                mbc,
		startTime:                             pcommon.NewTimestampFromTime(time.Now()),
		metricsBuffer:                         pmetric.NewMetrics(),
		buildInfo:                             settings.BuildInfo,
		resourceAttributeIncludeFilter:        map[string]filter.Filter{},
		resourceAttributeExcludeFilter:        map[string]filter.Filter{},
		metricGpuAttributionKubeletReady:      newMetricGpuAttributionKubeletReady(mbc.Metrics.GpuAttributionKubeletReady),
		metricGpuAttributionSourceErrorsTotal: newMetricGpuAttributionSourceErrorsTotal(mbc.Metrics.GpuAttributionSourceErrorsTotal),
		metricGpuUsedByExternalProcessCount:   newMetricGpuUsedByExternalProcessCount(mbc.Metrics.GpuUsedByExternalProcessCount),
		metricGpuUsedByZombieContainerCount:   newMetricGpuUsedByZombieContainerCount(mbc.Metrics.GpuUsedByZombieContainerCount),
		metricSlurmJobInfo:                    newMetricSlurmJobInfo(mbc.Metrics.SlurmJobInfo),
		metricTaskGpuDramActivePercent:        newMetricTaskGpuDramActivePercent(mbc.Metrics.TaskGpuDramActivePercent),
		metricTaskGpuMemPercent:               newMetricTaskGpuMemPercent(mbc.Metrics.TaskGpuMemPercent),
		metricTaskGpuPercent:                  newMetricTaskGpuPercent(mbc.Metrics.TaskGpuPercent),
		metricTaskGpuSmActivePercent:          newMetricTaskGpuSmActivePercent(mbc.Metrics.TaskGpuSmActivePercent),
		metricTaskGpuTensorActivePercent:      newMetricTaskGpuTensorActivePercent(mbc.Metrics.TaskGpuTensorActivePercent),
		metricZombieContainerCount:            newMetricZombieContainerCount(mbc.Metrics.ZombieContainerCount),
	}
	for name, rac := range resourceAttributes(mbc.ResourceAttributes) {
		if rac.MetricsInclude != nil {
			mb.resourceAttributeIncludeFilter[name] = filter.CreateFilter(rac.MetricsInclude)
		}
		if rac.MetricsExclude != nil {
			mb.resourceAttributeExcludeFilter[name] = filter.CreateFilter(rac.MetricsExclude)
		}
	}
	for _, op := range options {
		op.apply(mb)
	}
	return mb
}

// resourceAttributes pairs each resource attribute of metadata.yaml with its setting. mdatagen
// writes this list into the builders it generates; here it is kept by hand, and
// TestBuilderResourceAttributes fails when it and metadata.yaml differ.
func resourceAttributes(rac ResourceAttributesConfig) map[string]ResourceAttributeConfig {
	return map[string]ResourceAttributeConfig{
		"container_id":       rac.ContainerID,
		"container_name":     rac.ContainerName,
		"job_instance_id":    rac.JobInstanceID,
		"job_name":           rac.JobName,
		"k8s.container.name": rac.K8sContainerName,
		"k8s.namespace.name": rac.K8sNamespaceName,
		"k8s.pod.name":       rac.K8sPodName,
		"k8s.pod.uid":        rac.K8sPodUID,
		"namespace":          rac.Namespace,
		"node_name":          rac.NodeName,
		"pod_name":           rac.PodName,
		"pod_uid":            rac.PodUID,
		"role_name":          rac.RoleName,
		"simulated":          rac.Simulated,
		"slurm_job_id":       rac.SlurmJobID,
		"slurm_step":         rac.SlurmStep,
		"task_index":         rac.TaskIndex,
		"username":           rac.Username,
		"virtual_cluster":    rac.VirtualCluster,
	}
}
