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
		metricGpuAttributionSourceErrorsTotal: newMetricGpuAttributionSourceErrorsTotal(mbc.Metrics.GpuAttributionSourceErrorsTotal),
		metricGpuUsedByExternalProcessCount:   newMetricGpuUsedByExternalProcessCount(mbc.Metrics.GpuUsedByExternalProcessCount),
		metricGpuUsedByZombieContainerCount:   newMetricGpuUsedByZombieContainerCount(mbc.Metrics.GpuUsedByZombieContainerCount),
		metricTaskGpuMemPercent:               newMetricTaskGpuMemPercent(mbc.Metrics.TaskGpuMemPercent),
		metricTaskGpuPercent:                  newMetricTaskGpuPercent(mbc.Metrics.TaskGpuPercent),
		metricZombieContainerCount:            newMetricZombieContainerCount(mbc.Metrics.ZombieContainerCount),
	}
	for name, rac := range map[string]ResourceAttributeConfig{
		"container_id":       mbc.ResourceAttributes.ContainerID,
		"container_name":     mbc.ResourceAttributes.ContainerName,
		"job_instance_id":    mbc.ResourceAttributes.JobInstanceID,
		"job_name":           mbc.ResourceAttributes.JobName,
		"k8s.container.name": mbc.ResourceAttributes.K8sContainerName,
		"k8s.namespace.name": mbc.ResourceAttributes.K8sNamespaceName,
		"k8s.pod.name":       mbc.ResourceAttributes.K8sPodName,
		"k8s.pod.uid":        mbc.ResourceAttributes.K8sPodUID,
		"namespace":          mbc.ResourceAttributes.Namespace,
		"node_name":          mbc.ResourceAttributes.NodeName,
		"pod_name":           mbc.ResourceAttributes.PodName,
		"pod_uid":            mbc.ResourceAttributes.PodUID,
		"role_name":          mbc.ResourceAttributes.RoleName,
		"simulated":          mbc.ResourceAttributes.Simulated,
		"task_index":         mbc.ResourceAttributes.TaskIndex,
		"username":           mbc.ResourceAttributes.Username,
		"virtual_cluster":    mbc.ResourceAttributes.VirtualCluster,
	} {
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
