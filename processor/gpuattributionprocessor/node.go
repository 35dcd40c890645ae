// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podlogs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/internal/refresh"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
)

// container is what the node knows of one container. Identity (cgroup path, environment) is read
// once; names and zombie state are the latest refresh's. A published container is never changed.
type container struct {
	id, podUID string
	// cgroupDir is the container's cgroup directory; it is gone once the container is.
	cgroupDir string
	// task: a container of a pod, or one whose environment carries job labels; the others (a
	// pod's sandbox, a plain container outside Kubernetes) are not tasks.
	task    bool
	labels  tasklabels.Labels // from the environment only
	visible visibleDevices

	pod      podlogs.Pod
	podKnown bool
	name     string // container name in its pod, "" where the kubelet's layout does not tell

	// step is the Slurm job step this task stands for (the slurm source); nil for a container.
	step *slurmStep
}

// named is c as the kubelet's log layout names it: its pod and, for a task, its container name.
// A sandbox is never named: it has no logs, and the layout's guess for an unlinked container of
// the pod would give it the app container's name, under which pod-resources' claims are looked up.
func (c *container) named(pods *podlogs.Index) *container {
	n := *c
	n.pod, n.podKnown = pods.PodByUID(c.podUID)
	n.podKnown = n.podKnown && c.podUID != ""
	if n.podKnown && n.task {
		n.name = pods.ContainerName(c.podUID, c.id)
	}
	return &n
}

// taskLabels are the task's labels, the job named after its pod where the environment does not.
func (c *container) taskLabels() tasklabels.Labels {
	l := c.labels
	if c.podKnown {
		l.FallBackToPod(c.pod.Namespace, c.pod.Name)
	}
	return l
}

// inventory is one refresh of the node, read by every batch without locks.
type inventory struct {
	containers map[string]*container // by id
	// byName finds a task container the kubelet names (pod-resources has names, no ids).
	byName  map[podresources.ContainerKey]*container
	zombies map[string]metadata.AttributeZombieType // confirmed, by container id
	pods    *podlogs.Index
	// gpuDevices join DRA claims' devices to GPUs; nil when the kubelet's answer had none of a
	// GPU driver.
	gpuDevices *gpuDevices
	// kubelet is what this refresh trusts of the kubelet; nil when pod_resources is not a source.
	kubelet *kubeletView
	// slurm is what this refresh found of Slurm; nil when slurm is not a source.
	slurm *slurmView
}

type nodeSettings struct {
	root            string
	refreshInterval time.Duration
	zombieAfter     time.Duration
	// keepLastAnswer and agentPod: see PodResourcesConfig.
	keepLastAnswer time.Duration
	agentPod       podresources.PodKey
	// kubelet is nil when pod_resources is not an allocation source, dra when DRA claims are not
	// read.
	kubelet *podresources.Settings
	dra     *draSettings
	// slurm is nil when slurm is not an allocation source.
	slurm  *slurmSettings
	logger *zap.Logger
	// clock paces the refreshes (the kubelet's too) and dates what they see; a seam for tests,
	// as is refreshed, signaled after each refresh.
	clock     clock.Clock
	refreshed chan<- struct{}
}

// node lists the containers of one host on its own interval, for every processor of the
// collector that reads the same root (shared through nodes).
type node struct {
	set       nodeSettings
	proc      procfs.FS
	cgroupDir string // the hierarchy walked: the v2 root or v1's memory controller
	version   cgroupfs.Version

	pods           *podlogs.Cache
	releasePods    func()
	kubelet        *podresources.Client
	releaseKubelet func()

	// Owned by the refresh loop.
	known       map[string]*container
	orphanSince map[string]time.Time
	cgroupFail  bool
	cdi         *cdi.Reader // nil when DRA claims are not read
	// steps finds Slurm's steps (nil when slurm is not a source), walked in slurmMount ("" where
	// no hierarchy was found).
	steps        *slurm.ProcSteps
	slurmMount   string
	draFailing   bool
	kubeletState kubeletState

	inv atomic.Pointer[inventory]
	// visibleDeviceErrors count each environment source's malformed items (a map made whole at
	// start: only its counters change).
	visibleDeviceErrors map[Source]*atomic.Int64
	processReadErrors   atomic.Int64
	draErrors           atomic.Int64
	slurmErrors         atomic.Int64
	// incompleteAnswers count the kubelet's answers that could not be complete.
	incompleteAnswers atomic.Int64
	loop              *refresh.Loop
}

var nodes sharedcomponent.Registry[string, *sharedcomponent.Opened[*node]]

// acquireNode returns the collector's node for set.root, started; the first caller's settings
// are the node's.
func acquireNode(set nodeSettings) (*node, func(), error) {
	return sharedcomponent.Open(&nodes, filepath.Clean(set.root), func() (*node, error) {
		n, err := newNode(set)
		if err != nil {
			return nil, err
		}
		n.start()
		return n, nil
	})
}

func newNode(set nodeSettings) (*node, error) {
	proc, err := procfs.NewFS(filepath.Join(set.root, "proc"))
	if err != nil {
		return nil, fmt.Errorf("root_path: %w", err)
	}
	set.clock = clock.OrReal(set.clock)
	n := &node{
		set:         set,
		proc:        proc,
		known:       map[string]*container{},
		orphanSince: map[string]time.Time{},

		visibleDeviceErrors: map[Source]*atomic.Int64{},
	}
	for _, es := range environmentSources {
		n.visibleDeviceErrors[es.source] = &atomic.Int64{}
	}
	mount := filepath.Join(set.root, "sys", "fs", "cgroup")
	if n.version, err = cgroupfs.DetectVersion(mount); err != nil {
		// GPU processes are still resolved from /proc/<pid>/cgroup; only idle holders, the
		// environment source and zombies need the walk.
		set.logger.Warn("No cgroup hierarchy found: idle GPU holders and zombie containers are not seen", zap.Error(err))
	} else {
		n.cgroupDir = mount
		if n.version == cgroupfs.V1 {
			n.cgroupDir = filepath.Join(mount, "memory")
		}
	}
	if set.slurm != nil {
		if n.steps, err = slurm.NewProcSteps(filepath.Join(set.root, "proc"), set.slurm.layout); err != nil {
			return nil, fmt.Errorf("root_path: %w", err)
		}
		if n.cgroupDir != "" {
			n.slurmMount = slurm.WalkRoot(mount, n.version)
		}
	}
	n.pods, n.releasePods = podlogs.Shared(set.root)
	if set.dra != nil {
		n.cdi = cdi.NewReader(set.root, set.dra.cdiSpecDirs)
	}
	if set.kubelet != nil {
		kubelet := *set.kubelet
		kubelet.Clock = set.clock
		if n.kubelet, n.releaseKubelet, err = podresources.Shared(kubelet); err != nil {
			n.releasePods()
			return nil, err
		}
	}
	n.inv.Store(&inventory{containers: map[string]*container{}, byName: map[podresources.ContainerKey]*container{}, pods: podlogs.Empty()})
	return n, nil
}

func (n *node) start() {
	n.loop = refresh.Start(n.set.refreshInterval, n.set.clock, func() {
		n.refresh()
		if n.set.refreshed != nil {
			n.set.refreshed <- struct{}{}
		}
	})
}

// Close stops the refreshes and gives back what the node shares.
func (n *node) Close() {
	n.loop.Stop()
	if n.releaseKubelet != nil {
		n.releaseKubelet()
	}
	n.releasePods()
}

// current is the latest inventory.
func (n *node) current() *inventory { return n.inv.Load() }

func (n *node) refresh() {
	now := n.set.clock.Now()
	pods, err := n.pods.Get()
	if err != nil {
		n.set.logger.Debug("The kubelet's log layout could not be read", zap.Error(err))
	}
	var found []cgroupfs.Found
	if n.cgroupDir != "" {
		if found, err = cgroupfs.FindContainers(n.cgroupDir); err != nil {
			if !n.cgroupFail {
				n.set.logger.Warn("The cgroup tree could not be walked: idle GPU holders and zombies are not updated", zap.Error(err))
			}
			n.cgroupFail = true
			return
		}
		n.cgroupFail = false
	}
	inv := &inventory{
		containers: make(map[string]*container, len(found)),
		byName:     make(map[podresources.ContainerKey]*container, len(found)),
		zombies:    map[string]metadata.AttributeZombieType{},
		pods:       pods,
	}
	known := make(map[string]*container, len(found))
	for _, f := range found {
		c := n.known[f.ID]
		if c == nil {
			if c = n.identify(f); c == nil {
				continue // no readable process yet: tried again next time
			}
		}
		known[f.ID] = c
		named := c.named(pods)
		inv.containers[c.id] = named
		if named.name != "" {
			inv.byName[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: named.pod.Namespace, Pod: named.pod.Name}, Container: named.name}] = named
		}
	}
	// Judged against the containers just walked: an answer that lost pods whose containers run
	// is not complete.
	inv.kubelet = n.judgeKubelet(now, inv)
	var kube *podresources.Snapshot
	if inv.kubelet != nil {
		kube = inv.kubelet.answer
	}
	// After the kubelet's answer: a driver writes a claim's CDI spec before the kubelet lists
	// the claim, so every claim of the answer has its spec in this reading.
	inv.gpuDevices = n.readGPUDevices(kube)
	n.rememberDRAGPUs(inv.kubelet, inv)
	inv.slurm = n.readSlurm()
	n.judgeZombies(now, inv, kube)
	n.known = known
	n.countUnjoined(kube, inv)
	n.inv.Store(inv)
}

// judgeZombies finds the containers that outlived their pod for zombie_after. While the kubelet
// is not ready nobody becomes one (its answer then lacks live pods) and zombie_after counts again
// from when it is; a container already a zombie stays one.
func (n *node) judgeZombies(now time.Time, inv *inventory, kube *podresources.Snapshot) {
	if inv.kubelet != nil && !inv.kubelet.ready {
		before := n.inv.Load().zombies
		for id := range inv.containers {
			if t, zombie := before[id]; zombie {
				inv.zombies[id] = t
			} else {
				delete(n.orphanSince, id)
			}
		}
	} else {
		for id, c := range inv.containers {
			t, orphan := orphanType(c, inv.pods, kube)
			if !orphan {
				delete(n.orphanSince, id)
				continue
			}
			since, seen := n.orphanSince[id]
			if !seen {
				since = now
			}
			n.orphanSince[id] = since
			if now.Sub(since) >= n.set.zombieAfter {
				inv.zombies[id] = t
			}
		}
	}
	for id := range n.orphanSince {
		if _, ok := inv.containers[id]; !ok {
			delete(n.orphanSince, id)
		}
	}
}

// orphanType tells whether a pod's container outlived its pod, and how: the kubelet no longer
// lists the pod but keeps its logs (it finished), or it has no trace of it (it is gone). Without
// the log layout nothing can be said; without an answer of the kubelet to trust, only "gone".
func orphanType(c *container, pods *podlogs.Index, kube *podresources.Snapshot) (metadata.AttributeZombieType, bool) {
	if c.podUID == "" || !c.task || !pods.Present() {
		return 0, false
	}
	if !c.podKnown {
		return metadata.AttributeZombieTypePodGone, true
	}
	if kube != nil {
		if _, listed := kube.Pods[podresources.PodKey{Namespace: c.pod.Namespace, Pod: c.pod.Name}]; !listed {
			return metadata.AttributeZombieTypePodFinished, true
		}
	}
	return 0, false
}

// identify reads a new container's identity from the first of its processes that can be read.
func (n *node) identify(f cgroupfs.Found) *container {
	dir := filepath.Join(n.cgroupDir, f.Path)
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(procs))
	for sc.Scan() {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			continue
		}
		if c := n.identifyProcess(pid, f.Container, dir); c != nil {
			return c
		}
	}
	return nil
}

// identifyProcess reads a container's identity from one of its processes; nil when the process
// cannot be read (it exited).
func (n *node) identifyProcess(pid int, ctr cgroupfs.Container, cgroupDir string) *container {
	p, err := n.proc.Proc(pid)
	if err != nil {
		return nil
	}
	environ, err := p.Environ()
	if err != nil {
		return nil
	}
	comm, _ := p.Comm()
	env := tasklabels.ParseEnviron(environ)
	labels, fromEnv := tasklabels.FromEnv(env)
	visible, malformed := readVisibleDevices(env)
	for source, count := range malformed {
		n.visibleDeviceErrors[source].Add(int64(count))
	}
	sandbox := ctr.IsPodSandbox(comm)
	return &container{
		id:        ctr.ID,
		podUID:    ctr.PodUID,
		cgroupDir: cgroupDir,
		task:      !sandbox && (ctr.PodUID != "" || fromEnv),
		labels:    labels,
		visible:   visible,
	}
}

// containerOfProcess resolves a GPU process to its container through /proc/<pid>/cgroup, for
// every layout cgroupfs knows: the refreshed inventory's entry, or (a container newer than the
// last refresh) one identified from the process itself. ok is false when the process cannot be
// read; c is nil for a process outside any container. A process in a cgroup below its
// container's (kube-proxy, systemd or a nested runtime in the container) belongs to that container.
func (n *node) containerOfProcess(pid int, inv *inventory) (c *container, ok bool) {
	p, err := n.proc.Proc(pid)
	if err != nil {
		return nil, false
	}
	cgroups, err := p.Cgroups()
	if err != nil {
		return nil, false
	}
	// A process of a Slurm step is the step's, even in a container's cgroup (Slinky's slurmd
	// pod): the job, not the pod that runs slurmd, is what holds the GPU.
	if n.steps != nil {
		paths := make([]string, len(cgroups))
		for i, cg := range cgroups {
			paths[i] = cg.Path
		}
		step, inStep, err := n.stepOfProcess(pid, paths, inv)
		if err != nil {
			return nil, false
		}
		if inStep {
			return step, true
		}
	}
	for _, cg := range cgroups {
		ctr, isContainer := cgroupfs.ContainerOf(cg.Path)
		if !isContainer {
			continue
		}
		if known := inv.containers[ctr.ID]; known != nil {
			return known, true
		}
		c := n.identifyProcess(pid, ctr, "")
		if c == nil {
			return nil, false
		}
		return c.named(inv.pods), true
	}
	return nil, true
}
