// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// gpuReading is what one GPU's resource in a gpu receiver batch says.
type gpuReading struct {
	minor, uuid         string
	nodeName, simulated string
	// pciBusID is gpu_info's, in its writer's form; partitionDevice, on an AMD GPU partition,
	// the kernel device ROCm's device plugin allocates it by (its PCI address or amdgpu_xcp_N).
	pciBusID, partitionDevice string
	ts                        pcommon.Timestamp
	util, memUtil             float64
	hasUtil, hasMemUtil       bool
	procs                     []gpuProcess
	migs                      []migReading
	// activity is GPM's, of the whole GPU (gi "") and of each MIG instance: Hopper and newer.
	activity []gpmActivity
}

// gpmActivity is what GPM measured on a GPU or one of its MIG instances (gi, its GPU instance
// id; "" for the whole GPU) over the collection interval, in percent.
type gpmActivity struct {
	gi                        string
	sm, tensor, dram          float64
	hasSM, hasTensor, hasDRAM bool
}

// activityOf is the GPU's GPM reading for instance gi ("" the whole GPU), added when new.
func (g *gpuReading) activityOf(gi string) *gpmActivity {
	for i := range g.activity {
		if g.activity[i].gi == gi {
			return &g.activity[i]
		}
	}
	g.activity = append(g.activity, gpmActivity{gi: gi})
	return &g.activity[len(g.activity)-1]
}

// findActivity is the GPU's GPM reading for instance gi, if GPM measured it.
func (g *gpuReading) findActivity(gi string) (gpmActivity, bool) {
	for _, a := range g.activity {
		if a.gi == gi {
			return a, true
		}
	}
	return gpmActivity{}, false
}

type gpuProcess struct {
	pid     int
	pidAttr string
	memory  int64
	sm      int64
	hasSM   bool // NVML's per-process utilization; the KFD (AMD) has none
	// owner is the process's container (nil outside any); resolved is false when its /proc entry
	// could not be read (it exited between NVML's answer and ours).
	owner    *container
	resolved bool
}

type migReading struct {
	uuid string
	// gi and ci are its GPU and compute instance ids: how a DRA claim's device names it.
	gi, ci      string
	used, total int64
}

type gpuAttribution struct {
	cfg      *Config
	set      processor.Settings
	sources  []Source
	isGPURes func(string) bool
	node     *node
	release  func()
	// adjustNode is a seam for tests (the clock, the refresh signal); nil in production.
	adjustNode func(*nodeSettings)

	// mu serializes batches of the gpu receiver; the state below is theirs.
	mu    sync.Mutex
	mb    *metadata.MetricsBuilder
	stale *staleness.Tracker
	// owners caches each GPU process's container for one inventory (cleared when it changes,
	// so names learnt since are picked up).
	owners    map[int]pidOwner
	ownersInv *inventory
	// resources caches each task's resource for one inventory: building 18 attributes per task
	// and batch was most of a batch's allocations.
	resources map[*container]pcommon.Resource
	scratch   scratch
}

// scratch is a batch's working state, kept between batches so it is not allocated each time.
type scratch struct {
	devs        deviceIndex
	byContainer map[*container][]holding
	holders     map[target]int
	seen        map[int]bool
	alive       map[*container]bool
}

func (s *scratch) reset() {
	if s.devs == nil {
		*s = scratch{devs: deviceIndex{}, byContainer: map[*container][]holding{}, holders: map[target]int{}, seen: map[int]bool{}, alive: map[*container]bool{}}
	}
	clear(s.byContainer)
	clear(s.holders)
	clear(s.seen)
	clear(s.alive)
}

type pidOwner struct {
	c        *container
	resolved bool
}

func newGPUAttribution(cfg *Config, set processor.Settings) *gpuAttribution {
	return &gpuAttribution{
		cfg:       cfg,
		set:       set,
		sources:   cfg.AllocationSources,
		isGPURes:  resourceMatcher(cfg.PodResources.ResourceNames),
		mb:        metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		stale:     staleness.NewTracker(),
		owners:    map[int]pidOwner{},
		resources: map[*container]pcommon.Resource{},
	}
}

// resourceMatcher matches extended resource names, a trailing * as a prefix.
func resourceMatcher(names []string) func(string) bool {
	return func(r string) bool {
		for _, n := range names {
			if prefix, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(r, prefix) || n == r {
				return true
			}
		}
		return false
	}
}

func (p *gpuAttribution) start(context.Context, component.Host) error {
	set := nodeSettings{
		root:            p.cfg.RootPath,
		refreshInterval: p.cfg.RefreshInterval,
		zombieAfter:     p.cfg.ZombieAfter,
		keepLastAnswer:  p.cfg.PodResources.KeepLastAnswer,
		agentPod:        podresources.PodKey{Namespace: p.cfg.PodResources.AgentPod.Namespace, Pod: p.cfg.PodResources.AgentPod.Name},
		logger:          p.set.Logger,
	}
	if p.cfg.usesPodResources() {
		set.kubelet = &podresources.Settings{Socket: p.cfg.socket(), RefreshInterval: p.cfg.RefreshInterval, Timeout: p.cfg.PodResources.Timeout, Logger: p.set.Logger}
	}
	if p.cfg.readsDRA() {
		set.dra = &draSettings{drivers: p.cfg.PodResources.Drivers, cdiSpecDirs: p.cfg.PodResources.CDISpecDirs}
	}
	if p.cfg.usesSlurm() {
		set.slurm = &slurmSettings{layout: slurm.CgroupLayout{Slice: p.cfg.Slurm.CgroupSlice}, jobMappingDir: p.cfg.Slurm.JobMappingDir}
	}
	if p.adjustNode != nil {
		p.adjustNode(&set)
	}
	var err error
	p.node, p.release, err = acquireNode(set)
	return err
}

func (p *gpuAttribution) shutdown(context.Context) error {
	if p.release != nil {
		p.release()
		p.release = nil
	}
	return nil
}

// processMetrics passes every batch on; a batch with GPUs (the gpu receiver's) gains the
// attribution. Nothing here waits on the kubelet or walks the host: those are the node's
// refreshes, and the join needs no other receiver's batch.
func (p *gpuAttribution) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	gpus := readGPUs(md)
	if len(gpus) == 0 {
		return md, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.attribute(gpus)
	// A task that ended, a process that left: their series end now, not at metric_expiration.
	p.stale.EndGone(out, gpus[0].ts)
	out.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	return md, nil
}

// readGPUs finds the GPUs of a batch: resources with minor_number and uuid.
func readGPUs(md pmetric.Metrics) []gpuReading {
	var gpus []gpuReading // nil for a batch without GPUs: nothing allocated for the task receiver's
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		minor, ok := attrs.Get(gpunames.KeyMinorNumber)
		if !ok {
			continue
		}
		uuid, ok := attrs.Get(gpunames.KeyUUID)
		if !ok {
			continue
		}
		if gpus == nil {
			gpus = make([]gpuReading, 0, md.ResourceMetrics().Len())
		}
		g := gpuReading{minor: minor.AsString(), uuid: uuid.AsString()}
		if v, ok := attrs.Get(gpunames.KeyNodeName); ok {
			g.nodeName = v.AsString()
		}
		if v, ok := attrs.Get(gpunames.KeySimulated); ok {
			g.simulated = v.AsString()
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				g.read(ms.At(k))
			}
		}
		if !g.hasUtil && !g.hasMemUtil && len(g.procs) == 0 && len(g.migs) == 0 {
			continue // a GPU with nothing to attribute this time (lost, or a stale end)
		}
		slices.SortFunc(g.procs, func(a, b gpuProcess) int { return a.pid - b.pid })
		g.migs = slices.DeleteFunc(g.migs, func(m migReading) bool { return m.total <= 0 })
		slices.SortFunc(g.migs, func(a, b migReading) int { return strings.Compare(a.uuid, b.uuid) })
		gpus = append(gpus, g)
	}
	return gpus
}

// process is the GPU's entry for pid, added when new; a GPU has a handful.
func (g *gpuReading) process(pidAttr string) *gpuProcess {
	for i := range g.procs {
		if g.procs[i].pidAttr == pidAttr {
			return &g.procs[i]
		}
	}
	pid, err := strconv.Atoi(pidAttr)
	if err != nil {
		return nil
	}
	g.procs = append(g.procs, gpuProcess{pid: pid, pidAttr: pidAttr})
	return &g.procs[len(g.procs)-1]
}

func (g *gpuReading) mig(uuid string) *migReading {
	for i := range g.migs {
		if g.migs[i].uuid == uuid {
			return &g.migs[i]
		}
	}
	g.migs = append(g.migs, migReading{uuid: uuid})
	return &g.migs[len(g.migs)-1]
}

func (g *gpuReading) read(m pmetric.Metric) {
	if m.Type() != pmetric.MetricTypeGauge {
		return
	}
	dps := m.Gauge().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if dp.Flags().NoRecordedValue() {
			continue
		}
		if g.ts == 0 {
			g.ts = dp.Timestamp()
		}
		switch name := m.Name(); name {
		case gpunames.GPUInfo:
			g.readInfo(dp)
		case gpunames.GPUUtilization:
			g.util, g.hasUtil = number(dp), true
		case gpunames.GPUMemUtilization:
			g.memUtil, g.hasMemUtil = number(dp), true
		case gpunames.GPUProcessMemoryUsedBytes, gpunames.GPUProcessSMUtilization:
			if g.procs == nil {
				g.procs = make([]gpuProcess, 0, dps.Len())
			}
			g.readProcess(name, dp)
		case gpunames.GPUMIGMemoryUsedBytes, gpunames.GPUMIGMemoryTotalBytes:
			g.readMIG(name, dp)
		case gpunames.GPUSMActivePercent, gpunames.GPUPipeActivePercent, gpunames.GPUDRAMActivePercent:
			g.readActivity(name, dp)
		}
	}
}

// readInfo takes gpu_info's PCI address and, on an AMD partition, its kernel device.
func (g *gpuReading) readInfo(dp pmetric.NumberDataPoint) {
	if v, ok := dp.Attributes().Get(gpunames.KeyPCIBusID); ok {
		g.pciBusID = v.Str()
	}
	if v, ok := dp.Attributes().Get(gpunames.KeyPartitionDevice); ok {
		g.partitionDevice = v.Str()
	}
}

// readProcess takes a process's memory or SM use; a point without a usable pid is skipped.
func (g *gpuReading) readProcess(name string, dp pmetric.NumberDataPoint) {
	pidAttr, ok := dp.Attributes().Get(gpunames.KeyPID)
	if !ok {
		return
	}
	pr := g.process(pidAttr.Str())
	if pr == nil {
		return
	}
	if name == gpunames.GPUProcessMemoryUsedBytes {
		pr.memory = int64(number(dp))
	} else {
		pr.sm, pr.hasSM = int64(number(dp)), true
	}
}

// readMIG takes a MIG instance's memory used or total, and its GPU and compute instances.
func (g *gpuReading) readMIG(name string, dp pmetric.NumberDataPoint) {
	u, ok := dp.Attributes().Get(gpunames.KeyMIGUUID)
	if !ok {
		return
	}
	mr := g.mig(u.Str())
	if v, ok := dp.Attributes().Get(gpunames.KeyGPUInstanceID); ok {
		mr.gi = v.AsString()
	}
	if v, ok := dp.Attributes().Get(gpunames.KeyComputeInstanceID); ok {
		mr.ci = v.AsString()
	}
	if name == gpunames.GPUMIGMemoryUsedBytes {
		mr.used = int64(number(dp))
	} else {
		mr.total = int64(number(dp))
	}
}

// readActivity takes GPM's SM, tensor pipe and DRAM activity, of the GPU or of one of its GPU
// instances.
func (g *gpuReading) readActivity(name string, dp pmetric.NumberDataPoint) {
	var gi string
	if v, ok := dp.Attributes().Get(gpunames.KeyGPUInstanceID); ok {
		gi = v.AsString()
	}
	switch name {
	case gpunames.GPUSMActivePercent:
		a := g.activityOf(gi)
		a.sm, a.hasSM = number(dp), true
	case gpunames.GPUDRAMActivePercent:
		a := g.activityOf(gi)
		a.dram, a.hasDRAM = number(dp), true
	default:
		if pipe, ok := dp.Attributes().Get(gpunames.KeyPipe); ok && pipe.Str() == gpunames.PipeTensor {
			a := g.activityOf(gi)
			a.tensor, a.hasTensor = number(dp), true
		}
	}
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// holding is one task's claim on one target.
type holding struct {
	t target
	c *container
	// by is the DRA claim that allocated it; zero for the other sources.
	by claimRef
}

// claimRef names a ResourceClaim.
type claimRef struct{ namespace, name string }

// attribute builds the batch's attribution metrics.
func (p *gpuAttribution) attribute(gpus []gpuReading) pmetric.Metrics {
	inv := p.node.current()
	p.scratch.reset()
	p.resolveOwners(gpus, inv)
	devs := p.scratch.devs
	devs.fill(gpus)
	holdings := p.holdings(gpus, inv, devs)
	ts := gpus[0].ts

	// One resource per task, in container id order so output is stable.
	byContainer := p.scratch.byContainer
	tasks := make([]*container, 0, len(holdings))
	for _, h := range holdings {
		if _, ok := byContainer[h.c]; !ok {
			tasks = append(tasks, h.c)
		}
		byContainer[h.c] = append(byContainer[h.c], h)
	}
	slices.SortFunc(tasks, func(a, b *container) int { return strings.Compare(a.id, b.id) })
	holders := p.scratch.holders
	for _, h := range holdings {
		holders[h.t]++
	}
	for _, c := range tasks {
		for _, h := range byContainer[c] {
			p.recordShare(gpus, h, holders[h.t], ts)
		}
		p.mb.EmitForResource(metadata.WithResource(p.taskResource(c, &gpus[0])))
	}

	if inv.slurm != nil {
		p.recordSlurmJobs(ts, inv, tasks)
	}

	// Processes outside any pod, and zombies, per GPU.
	for i := range gpus {
		g := &gpus[i]
		zombieSeen := map[string]bool{}
		for _, pr := range g.procs {
			switch {
			case !pr.resolved:
			case pr.owner == nil || !pr.owner.task:
				p.mb.RecordGpuUsedByExternalProcessCountDataPoint(ts, 1, g.minor, g.uuid, pr.pidAttr)
			case !zombieSeen[pr.owner.id]:
				if _, zombie := inv.zombies[pr.owner.id]; zombie {
					zombieSeen[pr.owner.id] = true
					p.mb.RecordGpuUsedByZombieContainerCountDataPoint(ts, 1, g.minor, g.uuid, pr.owner.id)
				}
			}
		}
	}
	counts := map[metadata.AttributeZombieType]int64{}
	for _, t := range inv.zombies {
		counts[t]++
	}
	for _, t := range []metadata.AttributeZombieType{metadata.AttributeZombieTypePodFinished, metadata.AttributeZombieTypePodGone} {
		p.mb.RecordZombieContainerCountDataPoint(ts, counts[t], t)
	}
	var kubeletErrors int64
	if p.node.kubelet != nil {
		kubeletErrors = p.node.kubelet.Failures() + p.node.incompleteAnswers.Load()
	}
	if inv.kubelet != nil {
		var ready int64
		if inv.kubelet.ready {
			ready = 1
		}
		p.mb.RecordGpuAttributionKubeletReadyDataPoint(ts, ready)
	}
	p.mb.RecordGpuAttributionSourceErrorsTotalDataPoint(ts, kubeletErrors, metadata.AttributeSourcePodResources)
	p.mb.RecordGpuAttributionSourceErrorsTotalDataPoint(ts, p.node.draErrors.Load(), metadata.AttributeSourceDra)
	for _, es := range environmentSources {
		p.mb.RecordGpuAttributionSourceErrorsTotalDataPoint(ts, p.node.visibleDeviceErrors[es.source].Load(), metadata.MapAttributeSource[string(es.source)])
	}
	p.mb.RecordGpuAttributionSourceErrorsTotalDataPoint(ts, p.node.processReadErrors.Load(), metadata.AttributeSourceProcess)
	if p.node.steps != nil {
		p.mb.RecordGpuAttributionSourceErrorsTotalDataPoint(ts, p.node.slurmErrors.Load()+p.node.steps.MalformedGPULists(), metadata.AttributeSourceSlurm)
	}
	rb := p.mb.NewResourceBuilder()
	rb.SetNodeName(gpus[0].nodeName)
	if gpus[0].simulated != "" {
		rb.SetSimulated(gpus[0].simulated)
	}
	return p.mb.Emit(metadata.WithResource(rb.Emit()))
}

// resolveOwners finds each GPU process's container, once per process and inventory.
func (p *gpuAttribution) resolveOwners(gpus []gpuReading, inv *inventory) {
	if inv != p.ownersInv {
		clear(p.owners)
		clear(p.resources)
		p.ownersInv = inv
	}
	seen := p.scratch.seen
	for i := range gpus {
		for j := range gpus[i].procs {
			pr := &gpus[i].procs[j]
			o, ok := p.owners[pr.pid]
			if !ok {
				o.c, o.resolved = p.node.containerOfProcess(pr.pid, inv)
				if !o.resolved {
					p.node.processReadErrors.Add(1)
				}
				p.owners[pr.pid] = o
			}
			pr.owner, pr.resolved = o.c, o.resolved
			seen[pr.pid] = true
		}
	}
	for pid := range p.owners {
		if !seen[pid] {
			delete(p.owners, pid)
		}
	}
}

// holdings asks the sources in order; on each GPU the first source that knows a holder of it
// (of the whole GPU or of one of its MIG slices) decides all of its holders, unless it names a
// holder it cannot find, which leaves the GPU to the next source. The kubelet's allocation is
// the truth where it has one: a GPU it allocated is decided by it alone (a holder that does
// not run, or that the node cannot find, holds it and nobody else does), and a container it
// allocated GPUs to holds those and no other; with no answer to trust, the GPUs it manages show
// no holder (kubeletDecided).
func (p *gpuAttribution) holdings(gpus []gpuReading, inv *inventory, devs deviceIndex) []holding {
	decided := make([]bool, len(gpus))
	// undecidable GPUs have a holder the source at hand names but cannot find: deciding them on
	// the holders it did find would give those the missing one's share.
	undecidable := make([]bool, len(gpus))
	out := make([]holding, 0, 4*len(gpus))
	isAlive := p.liveness(gpus)
	byKubelet, allocated := p.kubeletDecided(gpus, inv, devs)
	for _, source := range p.sources {
		var claims []holding
		clear(undecidable)
		claim := func(t target, c *container, by claimRef) {
			// A zombie holds nothing: its pod is gone (it shows as gpu_used_by_zombie_container_count).
			if _, zombie := inv.zombies[c.id]; zombie || decided[t.gpu] || !c.task {
				return
			}
			// The kubelet's GPUs are its alone; a container it gave GPUs gets no other.
			// ... unless it gave them to the container slurmd runs in, for Slurm's jobs (Slinky).
			if own, held := allocated[c]; source != SourcePodResources && (byKubelet[t.gpu] || held && !own[t.gpu]) &&
				(source != SourceSlurm || !hostHolds(c, inv, allocated, t)) {
				return
			}
			// A task holds a target once, under the first claim that names it.
			if !slices.ContainsFunc(claims, func(h holding) bool { return h.t == t && h.c == c }) {
				claims = append(claims, holding{t, c, by})
			}
		}
		switch source {
		case SourcePodResources:
			p.claimPodResources(inv, devs, isAlive, undecidable, claim)
		case SourceNvidiaVisibleDevices, SourceAMDVisibleDevices:
			claimVisibleDevices(source, inv, devs, isAlive, claim)
		case SourceProcess:
			claimProcesses(gpus, claim)
		case SourceSlurm:
			claimSlurm(gpus, inv, devs, isAlive, claim)
		}
		claims = slices.DeleteFunc(claims, func(h holding) bool { return undecidable[h.t.gpu] })
		for _, h := range claims {
			decided[h.t.gpu] = true
		}
		out = append(out, claims...)
	}
	// Map iteration above is random: order by GPU, slice, then container.
	slices.SortFunc(out, func(a, b holding) int {
		if a.t.gpu != b.t.gpu {
			return a.t.gpu - b.t.gpu
		}
		if a.t.mig != b.t.mig {
			return a.t.mig - b.t.mig
		}
		return strings.Compare(a.c.id, b.c.id)
	})
	return out
}

// liveness tells whether a container runs. One with a process on a GPU runs, by NVML's word;
// any other is checked (its cgroup is there), once a batch, so that one which stopped leaves at
// this batch, not at the next refresh.
func (p *gpuAttribution) liveness(gpus []gpuReading) func(*container) bool {
	alive := p.scratch.alive
	for i := range gpus {
		for _, pr := range gpus[i].procs {
			if pr.owner != nil {
				alive[pr.owner] = true
			}
		}
	}
	return func(c *container) bool {
		a, ok := alive[c]
		if !ok {
			a = unix.Access(c.cgroupDir, unix.F_OK) == nil
			alive[c] = a
		}
		return a
	}
}

// claimPodResources claims what the kubelet allocated to running containers, device plugins'
// devices and DRA claims; a device of a container the node cannot find makes its GPU
// undecidable.
func (p *gpuAttribution) claimPodResources(inv *inventory, devs deviceIndex, isAlive func(*container) bool, undecidable []bool, claim func(target, *container, claimRef)) {
	if inv.kubelet == nil || inv.kubelet.answer == nil {
		return
	}
	kube := inv.kubelet.answer
	for key, devices := range kube.Devices {
		// nil: a container not started yet, or whose name the node cannot tell (no log
		// layout); a container that stopped holds nothing and is no reason to wait.
		c := inv.byName[key]
		if c != nil && !isAlive(c) {
			continue
		}
		for _, d := range devices {
			if !p.isGPURes(d.Resource) {
				continue
			}
			for _, id := range d.IDs {
				t, ok := devs.resolve(id)
				switch {
				case !ok:
				case c == nil:
					undecidable[t.gpu] = true
				default:
					claim(t, c, claimRef{})
				}
			}
		}
	}
	p.claimDRA(kube, inv, devs, isAlive, undecidable, claim)
}

// claimVisibleDevices claims the GPUs a running container's environment variable of source
// names.
func claimVisibleDevices(source Source, inv *inventory, devs deviceIndex, isAlive func(*container) bool, claim func(target, *container, claimRef)) {
	for _, c := range inv.containers {
		if len(c.visible[source]) == 0 || !isAlive(c) {
			continue
		}
		for _, id := range c.visible[source] {
			if t, ok := devs.resolve(id); ok {
				claim(t, c, claimRef{})
			}
		}
	}
}

// claimProcesses claims each GPU for the containers of the processes on it.
func claimProcesses(gpus []gpuReading, claim func(target, *container, claimRef)) {
	for i := range gpus {
		for _, pr := range gpus[i].procs {
			if pr.owner != nil {
				claim(target{gpu: i, mig: -1}, pr.owner, claimRef{})
			}
		}
	}
}

// kubeletDecided are the GPUs of the batch the kubelet decides, and the GPUs it allocated to
// each container it allocated any to (the only ones another source may give that container).
// With an answer to trust: the GPUs it allocated (device plugins and joined DRA claims). With
// none (not ready past keep_last_answer): every GPU it manages, as far as it ever said (its
// allocatable devices, its claims' GPUs), every GPU where it never answered completely.
func (p *gpuAttribution) kubeletDecided(gpus []gpuReading, inv *inventory, devs deviceIndex) ([]bool, map[*container][]bool) {
	byKubelet := make([]bool, len(gpus))
	allocated := map[*container][]bool{}
	view := inv.kubelet
	if view == nil {
		return byKubelet, allocated
	}
	allocate := func(c *container, id string, decides bool) {
		t, ok := devs.resolve(id)
		if !ok {
			return
		}
		byKubelet[t.gpu] = byKubelet[t.gpu] || decides
		if c == nil {
			return
		}
		if allocated[c] == nil {
			allocated[c] = make([]bool, len(gpus))
		}
		allocated[c][t.gpu] = true
	}
	kube := view.answer
	switch {
	case kube != nil:
		for key, devices := range kube.Devices {
			for _, d := range devices {
				if p.isGPURes(d.Resource) {
					for _, id := range d.IDs {
						allocate(inv.byName[key], id, true)
					}
				}
			}
		}
		// A DRA device the node does not join to a GPU leaves its GPU unknown: any GPU another
		// claim of the same device was joined to is left to the next sources (as claimDRA
		// leaves it), and the containers that claimed it are not held to their joined GPUs.
		type deviceKey struct{ driver, pool, device string }
		type joinedDevice struct {
			c   *container
			ids []string
		}
		joined := map[deviceKey][]joinedDevice{}
		unjoined := map[deviceKey]bool{}
		unresolved := map[*container]bool{}
		for key, claims := range kube.Claims {
			c := inv.byName[key]
			for _, cl := range claims {
				for _, d := range cl.Devices {
					if !p.node.set.dra.gpuDriver(d.Driver) {
						continue
					}
					k := deviceKey{d.Driver, d.Pool, d.Device}
					if ids, ok := inv.gpuDevices.claimDevice(d); ok {
						joined[k] = append(joined[k], joinedDevice{c, ids})
					} else {
						unjoined[k] = true
						unresolved[c] = true
					}
				}
			}
		}
		for k, devices := range joined {
			for _, d := range devices {
				for _, id := range d.ids {
					allocate(d.c, id, !unjoined[k])
				}
			}
		}
		for c := range unresolved {
			delete(allocated, c)
		}
	case view.unknownInventory:
		for i := range byKubelet {
			byKubelet[i] = true
		}
	default:
		for _, d := range view.allocatable {
			if p.isGPURes(d.Resource) {
				for _, id := range d.IDs {
					allocate(nil, id, true)
				}
			}
		}
		for _, id := range view.draGPUs {
			allocate(nil, id, true)
		}
	}
	return byKubelet, allocated
}

// recordShare records h's use of its target: the device's values on a GPU it holds alone, its
// share by its processes on a GPU held by several, the slice's memory on a MIG slice; with the
// DRA claim that allocated it, if one did.
func (p *gpuAttribution) recordShare(gpus []gpuReading, h holding, holders int, ts pcommon.Timestamp) {
	t, c := h.t, h.c
	g := &gpus[t.gpu]
	var claim []metadata.MetricAttributeOption
	if h.by.name != "" {
		claim = []metadata.MetricAttributeOption{metadata.WithDraClaimNameMetricAttribute(h.by.name), metadata.WithDraClaimNamespaceMetricAttribute(h.by.namespace)}
	}
	if t.mig >= 0 {
		m := g.migs[t.mig]
		p.mb.RecordTaskGpuMemPercentDataPoint(ts, float64(m.used)/float64(m.total)*100, g.minor, g.uuid, m.uuid, claim...)
		// GPM measures each MIG instance: its activity is the slice's, however many share it.
		if a, ok := g.findActivity(m.gi); ok && m.gi != "" {
			p.recordActivity(ts, a, g, m.uuid, claim)
		}
		return
	}
	if holders == 1 {
		if g.hasUtil {
			p.mb.RecordTaskGpuPercentDataPoint(ts, g.util, g.minor, g.uuid, "", claim...)
		}
		if g.hasMemUtil {
			p.mb.RecordTaskGpuMemPercentDataPoint(ts, g.memUtil, g.minor, g.uuid, "", claim...)
		}
		if a, ok := g.findActivity(""); ok {
			p.recordActivity(ts, a, g, "", claim)
		}
		return
	}
	// Utilization is split by the processes' SM utilization; where none has one (AMD: the KFD
	// gives no per-process utilization), by their memory, the one per-process measure there is.
	bySM := slices.ContainsFunc(g.procs, func(pr gpuProcess) bool { return pr.hasSM })
	var use, useAll, mem, memAll int64
	for _, pr := range g.procs {
		w := pr.memory
		if bySM {
			w = pr.sm
		}
		useAll += w
		memAll += pr.memory
		if pr.owner == c {
			use += w
			mem += pr.memory
		}
	}
	if g.hasUtil {
		p.mb.RecordTaskGpuPercentDataPoint(ts, share(g.util, use, useAll), g.minor, g.uuid, "", claim...)
	}
	if g.hasMemUtil {
		p.mb.RecordTaskGpuMemPercentDataPoint(ts, share(g.memUtil, mem, memAll), g.minor, g.uuid, "", claim...)
	}
	// GPM measures the whole device. SM activity is split as utilization is; which process kept the tensor pipes or the memory busy no counter says, so
	// those two are not divided and stay the device's (gpu_pipe_active_percent, ...).
	if a, ok := g.findActivity(""); ok && a.hasSM {
		p.mb.RecordTaskGpuSmActivePercentDataPoint(ts, share(a.sm, use, useAll), g.minor, g.uuid, "", claim...)
	}
}

// recordActivity records GPM's activity of what a task holds alone: a whole GPU, or a MIG
// instance (migUUID set).
func (p *gpuAttribution) recordActivity(ts pcommon.Timestamp, a gpmActivity, g *gpuReading, migUUID string, claim []metadata.MetricAttributeOption) {
	if a.hasSM {
		p.mb.RecordTaskGpuSmActivePercentDataPoint(ts, a.sm, g.minor, g.uuid, migUUID, claim...)
	}
	if a.hasTensor {
		p.mb.RecordTaskGpuTensorActivePercentDataPoint(ts, a.tensor, g.minor, g.uuid, migUUID, claim...)
	}
	if a.hasDRAM {
		p.mb.RecordTaskGpuDramActivePercentDataPoint(ts, a.dram, g.minor, g.uuid, migUUID, claim...)
	}
}

// share is part of all of value; nothing to split by gives 0 (no process of the task ran).
func share(value float64, part, all int64) float64 {
	if all <= 0 {
		return 0
	}
	return value * float64(part) / float64(all)
}

func (p *gpuAttribution) taskResource(c *container, g *gpuReading) pcommon.Resource {
	if res, ok := p.resources[c]; ok {
		return res
	}
	rb := p.mb.NewResourceBuilder()
	rb.SetNodeName(g.nodeName)
	if g.simulated != "" {
		rb.SetSimulated(g.simulated)
	}
	c.taskLabels().SetOn(rb)
	if s := c.step; s != nil {
		rb.SetSlurmJobID(s.JobID)
		step := s.Step
		if s.mapped {
			step = tasklabels.Unknown
		}
		rb.SetSlurmStep(step)
		res := rb.Emit()
		p.resources[c] = res
		return res
	}
	rb.SetContainerID(c.id)
	if c.podUID != "" {
		rb.SetPodUID(c.podUID)
		rb.SetK8sPodUID(c.podUID)
	}
	if c.podKnown {
		rb.SetNamespace(c.pod.Namespace)
		rb.SetPodName(c.pod.Name)
		rb.SetK8sNamespaceName(c.pod.Namespace)
		rb.SetK8sPodName(c.pod.Name)
		if c.name != "" {
			rb.SetContainerName(c.name)
			rb.SetK8sContainerName(c.name)
		}
	}
	res := rb.Emit()
	p.resources[c] = res
	return res
}
