// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// NVML calls newer than old drivers. Each is looked up in the loaded library after Init: on a
// driver without it the reading is left out (or an older call used) instead of the process dying
// on an undefined symbol, which is what calling it would do.
const (
	symClocksEventReasons = "nvmlDeviceGetCurrentClocksEventReasons" // R535
	symMemoryInfoV2       = "nvmlDeviceGetMemoryInfo_v2"             // R510
	symRemappedRows       = "nvmlDeviceGetRemappedRows"              // R450
	symTotalEnergy        = "nvmlDeviceGetTotalEnergyConsumption"    // R418
	symMigMode            = "nvmlDeviceGetMigMode"                   // R450
	symGPM                = "nvmlGpmQueryDeviceSupport"              // R520
	symGPMMig             = "nvmlGpmMigSampleGet"                    // after GPM itself
	symFabricInfo         = "nvmlDeviceGetGpuFabricInfo"             // R525, no health mask
	symFabricInfoV4       = "nvmlDeviceGetGpuFabricInfo_v4"          // newest drivers, with the health mask
)

var optionalSymbols = []string{symClocksEventReasons, symMemoryInfoV2, symRemappedRows, symTotalEnergy, symMigMode, symGPM, symGPMMig, symFabricInfo, symFabricInfoV4}

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
	mb        *metadata.MetricsBuilder
	// lastProcessSample is the newest per-process utilization sample seen, so each collection
	// asks NVML only for the samples of its own interval.
	lastProcessSample uint64
	// gpm is the GPU's GPM sample buffers, kept from one collection to the next.
	gpm gpmState
	// linksSeenUp has bit n set once NVLink n was seen up: such a link down is a fault.
	linksSeenUp uint64
}

// start initializes NVML, or keeps retrying in the background with exponential backoff: the
// driver may be installed or reloaded while the collector runs.
func (s *gpuScraper) start() {
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

func (s *gpuScraper) tryInit(first bool) bool {
	if ret := s.libraryCall("Init", s.lib.Init); ret != nvml.SUCCESS {
		if first {
			s.logger.Warn("NVML is not available: GPU metrics are off (gpu_nvml_up 0) and Init is retried with backoff; everything else keeps running",
				zap.String("library", s.libraryName()), zap.String("error", ret.Error()),
				zap.Duration("first_retry", s.cfg.InitRetry.InitialInterval), zap.Duration("max_interval", s.cfg.InitRetry.MaxInterval))
		} else {
			s.logger.Debug("NVML Init failed again", zap.String("error", ret.Error()))
		}
		return false
	}
	s.symbols = map[string]bool{}
	var missing []string
	for _, sym := range optionalSymbols {
		if s.lib.Extensions().LookupSymbol(sym) == nil {
			s.symbols[sym] = true
		} else {
			missing = append(missing, sym)
		}
	}
	s.driver, _ = callLibrary(s, "SystemGetDriverVersion", s.lib.SystemGetDriverVersion)
	s.nvmlHolds.Store(1)
	s.ready.Store(true)
	s.enumMu.Lock()
	_ = s.enumerate() // a failure here is reported by the first collection, which enumerates again
	n := len(s.gpus)
	var set nvml.EventSet
	if s.cfg.XID.NVMLEvents {
		set = s.registerEvents()
	}
	s.enumMu.Unlock()
	s.logger.Info("NVML initialized", zap.String("driver_version", s.driver), zap.Int("gpus", n), zap.Strings("calls_missing_in_driver", missing))
	if set != nil {
		s.nvmlHolds.Add(1)
		s.watcher.Go(func() {
			s.watchEvents(set)
			if ret := set.Free(); ret != nvml.SUCCESS {
				s.logger.Debug("NVML event set free failed", zap.String("error", ret.Error()))
			}
			s.letGoOfNVML()
		})
	}
	return true
}

func (s *gpuScraper) libraryName() string {
	if s.cfg.LibraryPath != "" {
		return s.cfg.LibraryPath
	}
	return "libnvidia-ml.so.1"
}

// enumerate refreshes the GPU list and publishes the identities; the caller holds enumMu. A GPU
// that cannot be reached keeps its last identity, so its series keep their labels while down.
func (s *gpuScraper) enumerate() nvml.Return {
	count, ret := callLibrary(s, "DeviceGetCount", s.lib.DeviceGetCount)
	if ret != nvml.SUCCESS {
		return ret
	}
	for len(s.gpus) < count {
		i := len(s.gpus)
		s.gpus = append(s.gpus, &gpuState{id: &gpuIdentity{index: i}, mb: s.newMB(), timeouts: map[string]int64{}})
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
				st.linksSeenUp = 0 // another GPU's links are not this one's
			}
		}
		ids[i] = st.id
	}
	s.identities.Store(&ids)
	return nvml.SUCCESS
}

func (s *gpuScraper) identify(st *gpuState, index int, h nvml.Device) *gpuIdentity {
	id := &gpuIdentity{index: index, handle: h}
	id.uuid, _ = callGPU(s, st, "GetUUID", h.GetUUID)
	id.model, _ = callGPU(s, st, "GetName", h.GetName)
	if pci, ret := callGPU(s, st, "GetPciInfo", h.GetPciInfo); ret == nvml.SUCCESS {
		id.pci = pciAddr{domain: pci.Domain, bus: pci.Bus, device: pci.Device}
		id.pciBusID = cString(pci.BusId[:])
	}
	return id
}

func (s *gpuScraper) gpuByHandle(h nvml.Device) *gpuIdentity {
	if ids := s.identities.Load(); ids != nil {
		for _, id := range *ids {
			if id.handle == h {
				return id
			}
		}
	}
	return nil
}

func (s *gpuScraper) gpuByPCI(pci pciAddr) *gpuIdentity {
	if ids := s.identities.Load(); ids != nil {
		for _, id := range *ids {
			if id.pciBusID != "" && id.pci == pci {
				return id
			}
		}
	}
	return nil
}

// eventWait is how long one NVML event wait blocks when no XID comes: the watcher sleeps in
// NVML until an event is due, or the simulation closes, and wakes otherwise once an hour. NVML
// has no call that interrupts a wait, so shutdown does not wait for it (see nvmlHolds).
const eventWait = time.Hour

// eventRetryPause paces the waits after one failed (a lost GPU can make every wait fail at once).
const eventRetryPause = time.Second

// registerEvents creates the XID event set; the caller holds enumMu. Registration goes through
// each GPU's lane, so a GPU that hangs already at start holds back only itself. GPUs that
// cannot register (ERROR_NOT_SUPPORTED on old GPUs) are left to the kernel log.
func (s *gpuScraper) registerEvents() nvml.EventSet {
	set, ret := callLibrary(s, "EventSetCreate", s.lib.EventSetCreate)
	if ret != nvml.SUCCESS {
		s.logger.Warn("NVML event set unavailable: XIDs come from the kernel log only", zap.String("error", ret.Error()))
		return nil
	}
	registered := 0
	for _, st := range s.gpus {
		h := st.id.handle
		if h == nil || st.handleErr != nvml.SUCCESS {
			continue
		}
		supported, ret := callGPU(s, st, "GetSupportedEventTypes", h.GetSupportedEventTypes)
		if ret != nvml.SUCCESS || supported&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		_, ret = callGPU(s, st, "RegisterEvents", func() (struct{}, nvml.Return) {
			return struct{}{}, h.RegisterEvents(nvml.EventTypeXidCriticalError, set)
		})
		if ret == nvml.SUCCESS {
			registered++
		}
	}
	s.logger.Debug("Watching NVML XID events", zap.Int("gpus", registered), zap.Int("of", len(s.gpus)))
	return set
}

// watchEvents reads XIDs from the event set until the receiver stops; an event that arrives
// after the stop is dropped.
func (s *gpuScraper) watchEvents(set nvml.EventSet) {
	for {
		ev, ret := set.Wait(uint32(eventWait / time.Millisecond))
		select {
		case <-s.stop:
			return
		default:
		}
		switch ret {
		case nvml.SUCCESS:
			if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
				continue
			}
			gpu := s.gpuByHandle(ev.Device)
			occ := xidOccurrence{gpu: gpu, code: ev.EventData, source: metadata.AttributeSourceNvml}
			if gpu != nil {
				occ.pci = gpu.pciBusID
			}
			s.xids.add(occ)
		case nvml.ERROR_TIMEOUT:
		default:
			// A lost GPU can make every wait fail at once; pace the retries.
			s.logger.Debug("NVML event wait failed", zap.String("error", ret.Error()))
			if !clock.Sleep(s.clock, eventRetryPause, s.stop) {
				return
			}
		}
	}
}

// onKmsgLine turns an "NVRM: Xid" line into an occurrence on the GPU at its PCI address.
func (s *gpuScraper) onKmsgLine(line string) {
	x, ok := parseXIDLine(line)
	if !ok {
		return
	}
	occ := xidOccurrence{gpu: s.gpuByPCI(x.pci), code: x.code, source: metadata.AttributeSourceKmsg, message: x.message}
	if n, ok := xid.ParseNVLink(x.code, x.message); ok {
		occ.severity = n.Severity()
	}
	if occ.gpu != nil {
		occ.pci = occ.gpu.pciBusID
	} else {
		occ.pci = formatPCI(x.pci)
	}
	s.xids.add(occ)
}

// shutdown stops the goroutines and lets go of NVML: shut down now, or by the last of the
// event watcher and the GPM sample buffers a late call still uses, once it lets go.
func (s *gpuScraper) shutdown() {
	close(s.stop)
	if s.kmsg != nil {
		s.kmsg.Close()
	}
	s.release()
	s.wg.Wait() // the Init retries: after it, ready no longer changes
	if s.ready.Load() {
		s.enumMu.Lock()
		for _, st := range s.gpus {
			st.gpm.release()
		}
		s.enumMu.Unlock()
		s.letGoOfNVML()
	}
}

// letGoOfNVML drops one hold on the library and shuts NVML down after the last.
func (s *gpuScraper) letGoOfNVML() {
	if s.nvmlHolds.Add(-1) > 0 {
		return
	}
	if ret := s.libraryCall("Shutdown", s.lib.Shutdown); ret != nvml.SUCCESS {
		s.logger.Debug("NVML Shutdown failed", zap.String("error", ret.Error()))
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
