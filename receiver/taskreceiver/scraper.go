// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
	"github.com/prometheus/procfs/sysfs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
	"github.com/otelcol-gpu/otelcol-gpu/internal/nodename"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podlogs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// collectorName is the value of the name label on this receiver's self-metrics (OpenPAI's
// collector thread names were per source; ours is one loop).
const collectorName = "task"

// taskScraper collects one snapshot of the node per interval. Rates (task_cpu_percent,
// task_net_*_byte) need the previous snapshot, kept per container and dropped when it goes.
type taskScraper struct {
	cfg    *Config
	logger *zap.Logger
	// mb collects the node's metrics, containerMB one resource per container; tasks and
	// services are containerMB's two metric families.
	mb          *metadata.MetricsBuilder
	containerMB *metadata.MetricsBuilder
	containerRB *metadata.ResourceBuilder // reusable: Emit starts a new resource
	tasks       containerRecorders
	services    containerRecorders
	memTotal    uint64

	nodeName string
	proc     procfs.FS
	block    blockdevice.FS
	sys      sysfs.FS
	cgroups  *cgroupfs.Hierarchy // nil on a node without a cgroup hierarchy
	// steps finds Slurm's job steps, walked in stepsRoot; nil unless slurm is enabled.
	steps     *slurm.ProcSteps
	stepsRoot string
	// procFiles reads the /proc files of every container each collection (procRoot/<pid>/…).
	procFiles hostfile.Reader
	procRoot  string
	// podCache names pods and containers (shared with every component reading this root);
	// pods is its index for the collection under way.
	podCache    *podlogs.Cache
	releasePods func()
	pods        *podlogs.Index

	mountPointsExclude *regexp.Regexp
	fsTypesExclude     *regexp.Regexp
	diskExclude        *regexp.Regexp
	statfsCalls        *deadline.Keyed
	cmdlineCalls       *deadline.Keyed

	// clock dates the collections (rates divide by the time between them) and times the
	// statfs and command line deadlines; a seam for tests.
	clock clock.Clock

	iterations int64
	readErrors map[metadata.AttributeSource]int64
	// skipsLogged are the skips logged in this collection, skipsLoggedBefore in the last one.
	skipsLogged, skipsLoggedBefore map[skipKey]struct{}
	stale                          *staleness.Tracker
	containers                     map[string]*containerState
	// Reused by every collection: a container's process ids, and the network readings of the
	// namespaces read so far.
	pids           []int
	netByNamespace map[uint64]netCounters
	// and the node's process ids, and its processes in state D by command.
	allPIDs         []int
	uninterruptible map[string]int64
}

func newTaskScraper(cfg *Config, set receiver.Settings) *taskScraper {
	containerMB := metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set)
	return &taskScraper{
		cfg:         cfg,
		logger:      set.Logger,
		mb:          metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		containerMB: containerMB,
		containerRB: containerMB.NewResourceBuilder(),
		tasks:       taskRecorders(containerMB),
		services:    serviceRecorders(containerMB),
		clock:       clock.Real{},
		readErrors:  map[metadata.AttributeSource]int64{},
		stale:       staleness.NewTracker(),
		containers:  map[string]*containerState{},

		netByNamespace:    map[uint64]netCounters{},
		uninterruptible:   map[string]int64{},
		skipsLogged:       map[skipKey]struct{}{},
		skipsLoggedBefore: map[skipKey]struct{}{},
	}
}

func (s *taskScraper) start(context.Context, component.Host) error {
	var err error
	root := s.cfg.RootPath
	s.procRoot = filepath.Join(root, "proc")
	if s.proc, err = procfs.NewFS(s.procRoot); err != nil {
		return fmt.Errorf("root_path: %w", err)
	}
	if s.block, err = blockdevice.NewFS(filepath.Join(root, "proc"), filepath.Join(root, "sys")); err != nil {
		return fmt.Errorf("root_path: %w", err)
	}
	if s.sys, err = sysfs.NewFS(filepath.Join(root, "sys")); err != nil {
		return fmt.Errorf("root_path: %w", err)
	}
	if s.nodeName, err = nodename.Resolve(s.cfg.NodeName); err != nil {
		return err
	}
	// Validate compiled these already; a failure here would be a bug.
	s.mountPointsExclude = regexp.MustCompile(s.cfg.Filesystem.MountPointsExclude)
	s.fsTypesExclude = regexp.MustCompile(s.cfg.Filesystem.FSTypesExclude)
	s.diskExclude = regexp.MustCompile(s.cfg.Disk.DeviceExclude)
	s.statfsCalls = &deadline.Keyed{Guard: deadline.Guard{Timeout: s.cfg.Filesystem.StatfsTimeout, Clock: s.clock}}
	s.cmdlineCalls = &deadline.Keyed{Guard: deadline.Guard{Timeout: cmdlineTimeout, Clock: s.clock}}

	s.podCache, s.releasePods = podlogs.Shared(root)

	mount := filepath.Join(root, "sys", "fs", "cgroup")
	if s.cgroups, err = cgroupfs.NewHierarchy(mount); err != nil {
		// A node without cgroups still has node metrics; say once why tasks are missing.
		s.logger.Warn("No cgroup hierarchy found: task and service metrics are off", zap.Error(err))
	} else if s.cfg.Slurm.Enabled {
		if s.steps, err = slurm.NewProcSteps(s.procRoot, slurm.CgroupLayout{Slice: s.cfg.Slurm.CgroupSlice}); err != nil {
			return fmt.Errorf("root_path: %w", err)
		}
		s.stepsRoot = slurm.WalkRoot(mount, s.cgroups.Version())
	}
	return nil
}

func (s *taskScraper) shutdown(context.Context) error {
	if s.releasePods != nil {
		s.releasePods()
	}
	return nil
}

// scrape never fails as a whole: what cannot be read is counted in collector_read_errors_total
// and, for node-wide sources, returned as a partial error so it is also logged.
func (s *taskScraper) scrape(context.Context) (pmetric.Metrics, error) {
	now := pcommon.NewTimestampFromTime(s.clock.Now())
	s.iterations++
	s.startSkipLog()
	var errs scrapererror.ScrapeErrors

	// The node pass goes first: a container without a memory limit is given the node's memory.
	s.scrapeNode(now, &errs)
	s.scrapeProcesses(now, &errs)
	s.scrapeContainers(now)
	s.mb.RecordCollectorIterationCountTotalDataPoint(now, s.iterations, collectorName)
	for _, src := range slices.Sorted(maps.Keys(s.readErrors)) {
		s.mb.RecordCollectorReadErrorsTotalDataPoint(now, s.readErrors[src], collectorName, src)
	}
	rb := s.mb.NewResourceBuilder()
	rb.SetNodeName(s.nodeName)
	md := s.mb.Emit(metadata.WithResource(rb.Emit()))
	s.containerMB.Emit().ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	// A stopped container, an exited process: their series leave /metrics now, not at expiry.
	s.stale.EndGone(md, now)
	return md, errs.Combine()
}

// recoverRead is deferred around each read of host text. A parser library that panics on a cut
// line (procfs v0.23.0 does on a short /proc/net/dev line) costs that source, not the collector.
// errs is nil for a per-item source, whose item is then the one skipped.
func (s *taskScraper) recoverRead(source metadata.AttributeSource, item string, errs *scrapererror.ScrapeErrors) {
	if r := recover(); r != nil {
		err := fmt.Errorf("parser panicked: %v", r)
		if errs == nil {
			s.readFailed(source, item, err)
			return
		}
		s.nodeReadFailed(errs, source, err)
	}
}

// skipKey is one item of a source that could not be read: a container id, a pid, a mount point,
// or "" for a node-wide file.
type skipKey struct {
	source metadata.AttributeSource
	item   string
}

// readFailed counts a skipped item under its source and logs it at debug, with the error, once
// while it keeps failing: an item that fails in a collection and failed in the one before is not
// logged again, one that recovers and fails again is. The two sets this needs hold only what one
// collection skipped, so they stay bounded however many pids and containers come and go.
func (s *taskScraper) readFailed(source metadata.AttributeSource, item string, err error) {
	s.readErrors[source]++
	key := skipKey{source, item}
	if _, ok := s.skipsLogged[key]; ok {
		return
	}
	s.skipsLogged[key] = struct{}{}
	if _, ok := s.skipsLoggedBefore[key]; ok {
		return
	}
	fields := []zap.Field{zap.String("source", source.String()), zap.Error(err)}
	if item != "" {
		fields = append(fields, zap.String("item", item))
	}
	s.logger.Debug("Skipped what could not be read; logged once while it keeps failing", fields...)
}

// startSkipLog begins a collection's set of logged skips; the last one's becomes the one before.
func (s *taskScraper) startSkipLog() {
	clear(s.skipsLoggedBefore)
	s.skipsLogged, s.skipsLoggedBefore = s.skipsLoggedBefore, s.skipsLogged
}

// nodeReadFailed counts a node-wide source that could not be read and reports it as a partial error.
func (s *taskScraper) nodeReadFailed(errs *scrapererror.ScrapeErrors, source metadata.AttributeSource, err error) {
	s.readFailed(source, "", err)
	errs.AddPartial(1, fmt.Errorf("%s: %w", source.String(), err))
}
