// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// scrape probes /healthz and computes the cluster metrics from the informers' caches: a
// collection never lists the cluster, so its cost does not depend on the API server.
func (w *watchdog) scrape(ctx context.Context) (pmetric.Metrics, error) {
	now := pcommon.NewTimestampFromTime(time.Now())

	probeCtx, cancel := context.WithTimeout(ctx, w.cfg.HealthzTimeout)
	began := time.Now()
	status := probeHealthz(probeCtx, w.clients.rest)
	w.healthzLatency.Observe(time.Since(began))
	cancel()
	if status != healthyAnswer {
		w.countError(metadata.AttributeTypeHealthz)
	}
	w.mb.RecordK8sAPIServerCountDataPoint(now, 1, status, w.clients.host)

	if w.synced.Load() || (w.pods.HasSynced() && w.nodes.HasSynced()) {
		w.synced.Store(true)
		w.recordCluster(now)
	}

	for _, t := range metadata.MapAttributeType {
		w.mb.RecordProcessErrorLogTotalDataPoint(now, w.errorCounts[t].Load(), t)
	}

	md := w.mb.Emit(metadata.WithResource(w.resource))
	w.stale.EndGone(md, now)
	latency.AppendToScope(md, w.resource, metadata.ScopeName, w.set.BuildInfo.Version, now,
		w.healthzLatency, w.listPodsLatency, w.listNodesLatency)
	return md, nil
}

// recordCluster records pai_pod_count, pai_container_count, pai_job_pod_count, pai_node_count
// and k8s_node_gpu_* from the caches.
func (w *watchdog) recordCluster(now pcommon.Timestamp) {
	gpusUsed := map[string]int64{}
	for _, obj := range w.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		for _, c := range p.Status.Conditions {
			if !knownPodConditions[c.Type] {
				w.countError(metadata.AttributeTypeUnknownPodCond)
			}
		}
		w.recordPod(now, p)
		if p.Spec.NodeName != "" && !finished(p) {
			gpusUsed[p.Spec.NodeName] += podGPUs(p, w.cfg.GPUResourceNames)
		}
	}
	for _, obj := range w.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		for _, c := range n.Status.Conditions {
			if !knownNodeConditions[c.Type] {
				w.countError(metadata.AttributeTypeUnknownNodeCond)
			}
		}
		hostIP := nodeHostIP(n)
		w.mb.RecordPaiNodeCountDataPoint(now, 1, hostIP, n.Name,
			nodeCondition(n, corev1.NodeDiskPressure), nodeCondition(n, corev1.NodeMemoryPressure),
			nodeCondition(n, corev1.NodePIDPressure), nodeCondition(n, corev1.NodeReady),
			boolString(n.Spec.Unschedulable))

		total := nodeGPUs(n, w.cfg.GPUResourceNames)
		free := max(0, total-gpusUsed[n.Name])
		// OpenPAI's split: a cordoned node's free GPUs cannot be scheduled, so they are
		// reserved rather than available.
		available, reserved := free, int64(0)
		if n.Spec.Unschedulable {
			available, reserved = 0, free
		}
		w.mb.RecordK8sNodeGpuTotalDataPoint(now, total, hostIP, n.Name)
		w.mb.RecordK8sNodeGpuAvailableDataPoint(now, available, hostIP, n.Name)
		w.mb.RecordK8sNodeGpuReservedDataPoint(now, reserved, hostIP, n.Name)
	}
}

// recordPod reports a service pod (with the service label) and its containers, or else a job
// pod (with a job name); the service label wins, as in OpenPAI.
func (w *watchdog) recordPod(now pcommon.Timestamp, p *corev1.Pod) {
	hostIP := podHostIP(p)
	phase := lower(p.Status.Phase)
	if service, ok := p.Labels[w.cfg.ServiceLabel]; ok {
		w.mb.RecordPaiPodCountDataPoint(now, 1, service, p.Name, p.Namespace, phase, hostIP, p.Spec.NodeName,
			podCondition(p, corev1.PodInitialized), podCondition(p, corev1.PodScheduled), podCondition(p, corev1.PodReady))
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			state, _ := containerState(cs.State)
			if state == unknown {
				w.countError(metadata.AttributeTypeUnexpectedContainerState)
			}
			w.mb.RecordPaiContainerCountDataPoint(now, 1, service, p.Name, cs.Name, p.Namespace, state, hostIP,
				p.Spec.NodeName, boolString(cs.Ready))
		}
		return
	}
	if job := jobName(p, w.cfg.JobNameSources); job != "" {
		w.mb.RecordPaiJobPodCountDataPoint(now, 1, job, p.Name, phase, hostIP, p.Spec.NodeName,
			podCondition(p, corev1.PodInitialized), boolString(p.Spec.NodeName != ""),
			podCondition(p, corev1.PodScheduled), podCondition(p, corev1.PodReady))
	}
}
