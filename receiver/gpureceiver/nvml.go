// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// nvmlBackend reads NVIDIA GPUs through NVML (go-nvml, behind an injected nvml.Interface: the
// real library, or the simulation's mock of it). It owns the library (Init with retry and
// backoff, the XID event watcher, Shutdown), the GPU list and each GPU's collection state.
// Nothing calls the library before Init succeeded.
type nvmlBackend struct {
	// Set at construction, read-only after.
	cfg    *Config
	logger *zap.Logger
	clock  clock.Clock
	// lib is the library and its lifecycle (nvml_library.go).
	lib *nvmlLibrary

	// Every NVML call runs under guard (call_timeout, its latency into hist): a GPU's on that
	// GPU's lane (callGPU), the library's own on the library's (callLibrary).
	guard deadline.Guard
	hist  *latency.Histogram
	// stop ends the goroutines: wg has the Init retries and the kernel log reader; watcher the
	// XID event watcher, apart: shutdown cannot wake NVML's event wait, so it does not wait for
	// it (tests do). kmsg is the kernel log being followed, closed at shutdown to wake its read.
	stop    chan struct{}
	wg      sync.WaitGroup
	watcher sync.WaitGroup
	kmsg    *os.File

	// gpus is written by enumeration only, under enumMu's write lock; each GPU's collection
	// holds its read lock and touches only its own gpuState. identities is its published copy
	// for the XID goroutines.
	enumMu     sync.RWMutex
	gpus       []*gpuState
	identities atomic.Pointer[[]*gpuIdentity]
	xids       *xidTracker
	// onLate, if set, is told of each call as it passes its deadline (the node check's hung
	// GPUs); set before start.
	onLate func(LateCall)
}

func newNVMLBackend(ss scraperSettings, lib nvml.Interface, release func()) *nvmlBackend {
	cfg := ss.cfg
	hist := latency.New("cmd_nvml_latency_seconds", "Latency of NVML calls, hung ones included once they return.", ss.clock.Now())
	s := &nvmlBackend{
		cfg:    cfg,
		logger: ss.set.Logger,
		clock:  ss.clock,
		guard:  deadline.Guard{Timeout: cfg.CallTimeout, Observe: hist.Observe, Clock: ss.clock},
		hist:   hist,
		stop:   make(chan struct{}),
	}
	s.lib = &nvmlLibrary{Interface: lib, release: release, path: cfg.LibraryPath, guard: &s.guard, logger: ss.set.Logger}
	s.xids = &xidTracker{
		table:        xid.New(cfg.XID.Table),
		dedupWindow:  cfg.XID.DedupWindow,
		healthWindow: cfg.XID.HealthWindow,
		clock:        ss.clock,
		logger:       ss.set.Logger,
		resource:     func(id *gpuIdentity) pcommon.Resource { return ss.resource(id.deviceID()) },
		lb:           metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: cfg.Events, ResourceAttributes: cfg.ResourceAttributes}, ss.set),
		counts:       map[string]map[uint64]int64{},
		health:       map[string][]healthMark{},
	}
	return s
}

func (s *nvmlBackend) latency() *latency.Histogram { return s.hist }

// gpuIdentity is what a GPU is known by. It is immutable once published, so the XID
// goroutines can read it while a scrape replaces it.
type gpuIdentity struct {
	index    int
	uuid     string
	model    string
	pciBusID string
	pci      pciAddr
	handle   nvml.Device
}

// deviceID is what the GPU's resource is labeled with; nil for nil.
func (id *gpuIdentity) deviceID() *deviceID {
	if id == nil {
		return nil
	}
	return &deviceID{index: id.index, uuid: id.uuid}
}

// gpuState is a GPU's collection state, touched only by the scrape and enumeration, under
// enumMu (scrapes never overlap).
type gpuState struct {
	id *gpuIdentity
	// lane carries every NVML call on the GPU (callGPU); timeouts counts its calls past their
	// deadline, by call.
	lane     deadline.Lane
	timeouts map[string]int64
	// handleErr is why the last enumeration got no handle for this index.
	handleErr nvml.Return
	// lastProcessSample is the newest per-process utilization sample seen, so each collection
	// asks NVML only for the samples of its own interval.
	lastProcessSample uint64
	// gpm is the GPU's GPM sample buffers, kept from one collection to the next.
	gpm gpmState
	// linksSeenUp has bit n set once NVLink n was seen up: such a link down is a fault.
	linksSeenUp uint64
	// recovery is the driver's latest recovery action for the GPU, from a collection or from
	// NVML's recovery action event, whichever came last.
	recovery recoveryReading
}

// recoveryReading is a GPU's recovery action, when the driver reports one (known).
type recoveryReading struct {
	action recoveryaction.Action
	known  bool
}

// start follows the kernel log for XIDs, and initializes NVML or keeps retrying in the
// background with exponential backoff: the driver may be installed or reloaded while the
// collector runs.
func (s *nvmlBackend) start(events func(plog.Logs)) {
	s.xids.emit = events
	s.startKmsg()
	if s.tryInit(true) {
		return
	}
	s.wg.Go(func() {
		wait := s.cfg.InitRetry.InitialInterval
		for {
			if !clock.Sleep(s.clock, wait, s.stop) {
				return
			}
			if s.tryInit(false) {
				return
			}
			wait = min(2*wait, s.cfg.InitRetry.MaxInterval)
		}
	})
}

func (s *nvmlBackend) tryInit(first bool) bool {
	missing, ok := s.lib.init(first, s.cfg.InitRetry)
	if !ok {
		return false
	}
	s.enumMu.Lock()
	_ = s.enumerate() // a failure here is reported by the first collection, which enumerates again
	n := len(s.gpus)
	var set nvml.EventSet
	if s.cfg.XID.NVMLEvents {
		set = s.registerEvents()
	}
	s.enumMu.Unlock()
	s.logger.Info("NVML initialized", zap.String("driver_version", s.lib.driver), zap.Int("gpus", n), zap.Strings("calls_missing_in_driver", missing))
	if set != nil {
		s.lib.hold()
		s.watcher.Go(func() {
			s.watchEvents(set)
			if ret := set.Free(); ret != nvml.SUCCESS {
				s.logger.Debug("NVML event set free failed", zap.String("error", ret.Error()))
			}
			s.lib.letGo()
		})
	}
	return true
}

// enumerate refreshes the GPU list and publishes the identities; the caller holds enumMu. A GPU
// that cannot be reached keeps its last identity, so its series keep their labels while down.
func (s *nvmlBackend) enumerate() nvml.Return {
	count, ret := callLibrary(s.lib, "DeviceGetCount", s.lib.DeviceGetCount)
	if ret != nvml.SUCCESS {
		return ret
	}
	for len(s.gpus) < count {
		i := len(s.gpus)
		s.gpus = append(s.gpus, &gpuState{id: &gpuIdentity{index: i}, timeouts: map[string]int64{}})
	}
	for _, gone := range s.gpus[count:] {
		gone.gpm.release()
	}
	s.gpus = s.gpus[:count]
	ids := make([]*gpuIdentity, count)
	for i, st := range s.gpus {
		var h nvml.Device
		h, st.handleErr = callGPU(s, st, "DeviceGetHandleByIndex", func() (nvml.Device, nvml.Return) { return s.lib.DeviceGetHandleByIndex(i) })
		if st.handleErr == nvml.SUCCESS && (st.id.handle != h || st.id.uuid == "") {
			prev := st.id.uuid
			st.id = s.identify(st, i, h)
			// Another GPU, or the same one back: its GPM support is asked again.
			st.gpm.release()
			if st.id.uuid != prev {
				// another GPU's links and recovery action are not this one's
				st.linksSeenUp, st.recovery = 0, recoveryReading{}
			}
		}
		ids[i] = st.id
	}
	s.identities.Store(&ids)
	return nvml.SUCCESS
}

func (s *nvmlBackend) identify(st *gpuState, index int, h nvml.Device) *gpuIdentity {
	id := &gpuIdentity{index: index, handle: h}
	id.uuid, _ = callGPU(s, st, "GetUUID", h.GetUUID)
	id.model, _ = callGPU(s, st, "GetName", h.GetName)
	if pci, ret := callGPU(s, st, "GetPciInfo", h.GetPciInfo); ret == nvml.SUCCESS {
		id.pci = pciAddr{domain: pci.Domain, bus: pci.Bus, device: pci.Device}
		id.pciBusID = cString(pci.BusId[:])
	}
	return id
}

// discover enumerates the GPUs once NVML is up. Without a device count the known GPUs are
// reported down, with their labels.
func (s *nvmlBackend) discover(node *metadata.MetricsBuilder, now pcommon.Timestamp) []device {
	if !s.lib.ready.Load() {
		node.RecordGpuNvmlUpDataPoint(now, 0)
		return nil
	}
	node.RecordGpuNvmlUpDataPoint(now, 1)
	s.enumMu.Lock()
	defer s.enumMu.Unlock()
	if ret := s.enumerate(); ret == nvml.SUCCESS {
		node.RecordGpuDevicesDetectedDataPoint(now, int64(len(s.gpus)))
	} else {
		for _, st := range s.gpus {
			st.handleErr = ret
		}
	}
	devices := make([]device, len(s.gpus))
	for i, st := range s.gpus {
		devices[i] = st
	}
	return devices
}

// read collects one GPU (collectGPU, nvml_collect.go).
func (s *nvmlBackend) read(d device, mb *metadata.MetricsBuilder, now pcommon.Timestamp) deviceID {
	s.enumMu.RLock()
	defer s.enumMu.RUnlock()
	st := d.(*gpuState)
	s.collectGPU(st, mb, now)
	return *st.id.deviceID()
}

// finish has nothing to add: NVML's node readings are the listing's.
func (*nvmlBackend) finish(*metadata.MetricsBuilder, pcommon.Timestamp) {}

// shutdown stops the goroutines and lets go of NVML: shut down now, or by the last of the
// event watcher and the GPM sample buffers a late call still uses, once it lets go.
func (s *nvmlBackend) shutdown() {
	close(s.stop)
	if s.kmsg != nil {
		s.kmsg.Close()
	}
	s.lib.release()
	s.wg.Wait() // the Init retries: after it, ready no longer changes
	if s.lib.ready.Load() {
		s.enumMu.Lock()
		for _, st := range s.gpus {
			st.gpm.release()
		}
		s.enumMu.Unlock()
		s.lib.letGo()
	}
}

// cString reads an NVML char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
