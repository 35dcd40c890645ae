// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

type containerKind int

const (
	kindIgnored containerKind = iota // not a job's nor a service's: a plain container outside Kubernetes
	kindSandbox                      // the pod's pause container
	kindTask
	kindService
)

// containerState is what is kept between collections: the container's identity (its environment
// does not change, so it is read once; only the task labels are kept) and the previous counters
// for rates.
type containerState struct {
	identified bool
	kind       containerKind
	labels     tasklabels.Labels
	service    string // the process name, for a service whose container is not named

	prev        containerSample
	hasPrev     bool
	hostNetwork bool
	// seenIn is the collection that last found the container running.
	seenIn int64

	resource    pcommon.Resource
	resourceKey containerResourceKey
	hasResource bool
}

type containerSample struct {
	at         time.Time
	cpuOK      bool
	cpuSeconds float64
	netOK      bool
	net        netCounters
}

type netCounters struct{ rx, tx uint64 }

func (s *taskScraper) scrapeContainers(now pcommon.Timestamp) {
	if s.cgroups == nil {
		return
	}
	found, err := s.cgroups.FindContainers()
	if err != nil {
		s.readFailed(metadata.AttributeSourceCgroup, "", err)
		return
	}
	if s.pods, err = s.podCache.Get(); err != nil {
		// The last good index (or none) names what it can.
		s.readFailed(metadata.AttributeSourcePodLogs, "", err)
	}
	hostNetNS, err := s.netNamespace("1")
	if err != nil {
		// Without the node's namespace a host-network container cannot be told apart, and would
		// be charged the node's traffic: no container gets network metrics this time.
		s.readFailed(metadata.AttributeSourceNetNs, "", err)
	}
	clear(s.netByNamespace)
	for _, f := range found {
		s.scrapeContainer(now, f, hostNetNS)
	}
	s.scrapeSteps(now)
	for id, st := range s.containers {
		if st.seenIn != s.iterations {
			delete(s.containers, id)
		}
	}
}

// scrapeContainer records one container and marks it seen while it has processes.
func (s *taskScraper) scrapeContainer(now pcommon.Timestamp, f cgroupfs.Found, hostNetNS uint64) {
	defer s.recoverRead(metadata.AttributeSourceCgroup, f.ID, nil)
	var err error
	if s.pids, err = s.cgroups.Processes(f.Path, s.pids); err != nil {
		s.readFailed(metadata.AttributeSourceCgroup, f.ID, err)
		return
	}
	if len(s.pids) == 0 {
		// An empty cgroup is a container being torn down: nothing runs, nothing to charge.
		return
	}
	st := s.containers[f.ID]
	if st == nil {
		st = &containerState{}
		s.containers[f.ID] = st
	}
	st.seenIn = s.iterations
	if !st.identified {
		s.identify(st, f, s.pids)
	}
	if st.kind == kindIgnored || st.kind == kindSandbox {
		return
	}
	stats, err := s.cgroups.Stat(f.Path)
	if err != nil {
		// A controller that cannot be read costs its own metrics, not the container's others.
		s.readFailed(metadata.AttributeSourceCgroup, f.ID, err)
		if !stats.CPUOK && !stats.MemoryOK && !stats.IOOK {
			return
		}
	}
	net, netOK := s.readNet(f.ID, s.pids, hostNetNS, st)
	s.recordContainer(now, f, st, stats, net, netOK)
}

// identify classifies a container and reads its labels from the environment of its first
// readable process. A container whose processes cannot be read yet is tried again next time.
func (s *taskScraper) identify(st *containerState, f cgroupfs.Found, pids []int) {
	for _, pid := range pids {
		p, err := s.proc.Proc(pid)
		if err != nil {
			// Exited since the cgroup listed it.
			s.readFailed(metadata.AttributeSourceProc, f.ID, err)
			continue
		}
		environ, err := p.Environ()
		if err != nil {
			s.readFailed(metadata.AttributeSourceEnviron, f.ID, err)
			continue
		}
		comm, err := p.Comm()
		if err != nil {
			s.readFailed(metadata.AttributeSourceComm, f.ID, err)
			continue
		}
		st.identified = true
		var hasTaskEnv bool
		st.labels, hasTaskEnv = tasklabels.FromEnv(tasklabels.ParseEnviron(environ))
		switch {
		case f.IsPodSandbox(comm):
			st.kind = kindSandbox
		case f.PodUID != "" && s.isServiceNamespace(pid, f.PodUID):
			st.kind, st.service = kindService, comm
		case f.PodUID != "" || hasTaskEnv:
			st.kind = kindTask
		default:
			st.kind = kindIgnored
		}
		return
	}
}

// isServiceNamespace reads the pod's namespace from the kubelet's log layout, else from the
// service-account mount Kubernetes puts in every container that has one.
func (s *taskScraper) isServiceNamespace(pid int, podUID string) bool {
	if len(s.cfg.ServiceNamespaces) == 0 {
		return false
	}
	if pod, ok := s.pods.PodByUID(podUID); ok {
		return slices.Contains(s.cfg.ServiceNamespaces, pod.Namespace)
	}
	b, err := os.ReadFile(filepath.Join(s.cfg.RootPath, "proc", strconv.Itoa(pid), "root",
		"var", "run", "secrets", "kubernetes.io", "serviceaccount", "namespace"))
	if err != nil {
		return false
	}
	return slices.Contains(s.cfg.ServiceNamespaces, strings.TrimSpace(string(b)))
}

// readNet sums the container's network devices (all but lo) as seen from one of its processes;
// containers sharing a namespace (those of a pod) share one reading. A container in the node's
// network namespace is marked and gets no network metrics: they would be the node's traffic
// charged to it. hostNetNS 0 (unknown) gives no network metrics at all.
func (s *taskScraper) readNet(containerID string, pids []int, hostNetNS uint64, st *containerState) (netCounters, bool) {
	if hostNetNS == 0 {
		return netCounters{}, false
	}
	for _, pid := range pids {
		pidDir := strconv.Itoa(pid)
		ns, err := s.netNamespace(pidDir)
		if err != nil {
			continue // exited since the cgroup listed it
		}
		st.hostNetwork = ns == hostNetNS
		if st.hostNetwork {
			return netCounters{}, false
		}
		if c, ok := s.netByNamespace[ns]; ok {
			return c, true
		}
		b, err := s.procFiles.ReadFile(s.procRoot, pidDir, "net/dev")
		var c netCounters
		if err == nil {
			c, err = netTotals(b)
		}
		if err != nil {
			s.readFailed(metadata.AttributeSourceNetDev, containerID, err)
			continue
		}
		s.netByNamespace[ns] = c
		return c, true
	}
	return netCounters{}, false
}

func (s *taskScraper) recordContainer(now pcommon.Timestamp, f cgroupfs.Found, st *containerState, stats cgroupfs.Stats, net netCounters, netOK bool) {
	s.recordUsage(now, st, stats, net, netOK)
	if key := s.resourceKey(f, st); !st.hasResource || key != st.resourceKey {
		st.resource, st.resourceKey, st.hasResource = s.containerResource(f, st, key), key, true
	}
	s.containerMB.EmitForResource(metadata.WithResource(st.resource))
}

// recordUsage records a task's or service's usage, rates against its previous sample.
func (s *taskScraper) recordUsage(now pcommon.Timestamp, st *containerState, stats cgroupfs.Stats, net netCounters, netOK bool) {
	r := s.tasks
	if st.kind == kindService {
		r = s.services
	}
	at := now.AsTime()
	if stats.CPUOK {
		r.cpuSeconds(now, stats.CPUSeconds)
	}
	if st.hasPrev {
		if dt := at.Sub(st.prev.at).Seconds(); dt > 0 {
			if d := stats.CPUSeconds - st.prev.cpuSeconds; stats.CPUOK && st.prev.cpuOK && d >= 0 {
				r.cpuPercent(now, d/dt*100)
			}
			if netOK && st.prev.netOK && net.rx >= st.prev.net.rx && net.tx >= st.prev.net.tx {
				r.netIn(now, float64(net.rx-st.prev.net.rx)/dt)
				r.netOut(now, float64(net.tx-st.prev.net.tx)/dt)
			}
		}
	}
	st.prev, st.hasPrev = containerSample{at: at, cpuOK: stats.CPUOK, cpuSeconds: stats.CPUSeconds, netOK: netOK, net: net}, true

	if stats.MemoryOK {
		// docker stats' usage: page cache that can be dropped at once is not the container's use.
		usage := stats.MemoryUsage
		if stats.InactiveFile < usage {
			usage -= stats.InactiveFile
		}
		limit := stats.MemoryLimit
		if s.memTotal > 0 && (limit == 0 || limit > s.memTotal) {
			limit = s.memTotal
		}
		r.memUsage(now, int64(usage))
		if limit > 0 {
			r.memLimit(now, int64(limit))
			r.memPercent(now, float64(usage)/float64(limit)*100)
		}
	}
	if netOK {
		r.netReceive(now, int64(net.rx))
		r.netTransmit(now, int64(net.tx))
	}
	if stats.IOOK {
		r.blockIn(now, int64(stats.ReadBytes))
		r.blockOut(now, int64(stats.WriteBytes))
	}
}

// containerResourceKey is what can change in a container's resource attributes: the names the
// kubelet's log layout gives (absent until it has written them) and the network namespace; in a
// Slurm step's, whether its environment could be read.
type containerResourceKey struct {
	namespace, podName, containerName string
	hostNetwork                       bool
	// stepFromEnviron: a Slurm step's labels were read from its environment (not its path only).
	stepFromEnviron bool
}

func (s *taskScraper) resourceKey(f cgroupfs.Found, st *containerState) containerResourceKey {
	key := containerResourceKey{hostNetwork: st.hostNetwork}
	if pod, ok := s.pods.PodByUID(f.PodUID); ok && f.PodUID != "" {
		key.namespace, key.podName = pod.Namespace, pod.Name
		key.containerName = s.pods.ContainerName(f.PodUID, f.ID)
	}
	return key
}

// containerResource builds the container's resource; it is kept in the container's state and
// rebuilt only when its key changes (EmitForResource copies it into each collection's metrics).
func (s *taskScraper) containerResource(f cgroupfs.Found, st *containerState, key containerResourceKey) pcommon.Resource {
	rb := s.containerRB
	rb.SetNodeName(s.nodeName)
	rb.SetContainerID(f.ID)
	if f.PodUID != "" {
		rb.SetPodUID(f.PodUID)
	}
	if key.namespace != "" || key.podName != "" {
		rb.SetNamespace(key.namespace)
		rb.SetPodName(key.podName)
	}
	if key.containerName != "" {
		rb.SetContainerName(key.containerName)
	}
	if key.hostNetwork {
		rb.SetHostNetwork("true")
	}
	if st.kind == kindService {
		rb.SetName(cmp.Or(key.containerName, st.service))
	} else {
		labels := st.labels
		if key.namespace != "" || key.podName != "" {
			labels.FallBackToPod(key.namespace, key.podName)
		}
		labels.SetOn(rb)
	}
	return rb.Emit()
}

// containerRecorders are the record functions of one metric family (task_* or service_*), which
// share suffixes and semantics.
type containerRecorders struct {
	cpuPercent, cpuSeconds, memPercent, netIn, netOut              func(pcommon.Timestamp, float64)
	memUsage, memLimit, netReceive, netTransmit, blockIn, blockOut func(pcommon.Timestamp, int64)
}

func taskRecorders(mb *metadata.MetricsBuilder) containerRecorders {
	return containerRecorders{
		cpuPercent: mb.RecordTaskCPUPercentDataPoint, cpuSeconds: mb.RecordTaskCPUSecondsTotalDataPoint,
		memPercent: mb.RecordTaskMemUsagePercentDataPoint, netIn: mb.RecordTaskNetInByteDataPoint,
		netOut: mb.RecordTaskNetOutByteDataPoint, memUsage: mb.RecordTaskMemUsageByteDataPoint,
		memLimit: mb.RecordTaskMemLimitByteDataPoint, netReceive: mb.RecordTaskNetworkReceiveBytesTotalDataPoint,
		netTransmit: mb.RecordTaskNetworkTransmitBytesTotalDataPoint, blockIn: mb.RecordTaskBlockInByteDataPoint,
		blockOut: mb.RecordTaskBlockOutByteDataPoint,
	}
}

func serviceRecorders(mb *metadata.MetricsBuilder) containerRecorders {
	return containerRecorders{
		cpuPercent: mb.RecordServiceCPUPercentDataPoint, cpuSeconds: mb.RecordServiceCPUSecondsTotalDataPoint,
		memPercent: mb.RecordServiceMemUsagePercentDataPoint, netIn: mb.RecordServiceNetInByteDataPoint,
		netOut: mb.RecordServiceNetOutByteDataPoint, memUsage: mb.RecordServiceMemUsageByteDataPoint,
		memLimit: mb.RecordServiceMemLimitByteDataPoint, netReceive: mb.RecordServiceNetworkReceiveBytesTotalDataPoint,
		netTransmit: mb.RecordServiceNetworkTransmitBytesTotalDataPoint, blockIn: mb.RecordServiceBlockInByteDataPoint,
		blockOut: mb.RecordServiceBlockOutByteDataPoint,
	}
}
