// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// The NVML backend's two sources of XIDs, NVML's event set and the kernel log's "NVRM: Xid"
// lines, both matched to the GPUs enumeration published and counted by the xidTracker (xid.go).

func (s *nvmlBackend) gpuByHandle(h nvml.Device) *gpuIdentity {
	if ids := s.identities.Load(); ids != nil {
		for _, id := range *ids {
			if id.handle == h {
				return id
			}
		}
	}
	return nil
}

func (s *nvmlBackend) gpuByPCI(pci pciAddr) *gpuIdentity {
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
// has no call that interrupts a wait, so shutdown does not wait for it (see nvmlLibrary.holds).
const eventWait = time.Hour

// eventRetryPause paces the waits after one failed (a lost GPU can make every wait fail at once).
const eventRetryPause = time.Second

// watchedEvents are the NVML events the event set asks for: XIDs, and the driver's recovery
// action changing (R565 and later drivers; the collections poll it too).
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeGpuRecoveryAction

// registerEvents creates the event set; the caller holds enumMu. Registration goes through
// each GPU's lane, so a GPU that hangs already at start holds back only itself. GPUs that
// cannot register (ERROR_NOT_SUPPORTED on old GPUs) are left to the kernel log.
func (s *nvmlBackend) registerEvents() nvml.EventSet {
	set, ret := callLibrary(s.lib, "EventSetCreate", s.lib.EventSetCreate)
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
		mask := supported & watchedEvents
		if ret != nvml.SUCCESS || mask == 0 {
			continue
		}
		_, ret = callGPU(s, st, "RegisterEvents", func() (struct{}, nvml.Return) {
			return struct{}{}, h.RegisterEvents(mask, set)
		})
		if ret == nvml.SUCCESS {
			registered++
		}
	}
	s.logger.Debug("Watching NVML XID events", zap.Int("gpus", registered), zap.Int("of", len(s.gpus)))
	return set
}

// watchEvents reads XIDs and recovery action changes from the event set until the receiver
// stops; an event that arrives after the stop is dropped.
func (s *nvmlBackend) watchEvents(set nvml.EventSet) {
	for {
		ev, ret := set.Wait(uint32(eventWait / time.Millisecond))
		select {
		case <-s.stop:
			return
		default:
		}
		switch ret {
		case nvml.SUCCESS:
			if ev.EventType&nvml.EventTypeGpuRecoveryAction != 0 {
				s.onRecoveryActionEvent(ev.Device)
			}
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

// onRecoveryActionEvent reads the recovery action of the GPU whose event fired, at once: the
// event says only that it changed. The read is the collections' (field 230 through the GPU's
// lane, under call_timeout) and holds enumMu's write lock, so no collection of the GPU runs
// beside it and at most one call_timeout holds the next collection back.
func (s *nvmlBackend) onRecoveryActionEvent(h nvml.Device) {
	s.enumMu.Lock()
	defer s.enumMu.Unlock()
	i := slices.IndexFunc(s.gpus, func(st *gpuState) bool { return st.id.handle == h })
	if i < 0 {
		return
	}
	st := s.gpus[i]
	v, ret := callGPU(s, st, "GetFieldValues", func() (nvml.FieldValue, nvml.Return) {
		v := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
		ret := h.GetFieldValues(v)
		return v[0], ret
	})
	if ret != nvml.SUCCESS {
		s.logger.Debug("NVML recovery action read after its event failed", zap.Int("gpu", st.id.index), zap.String("error", ret.Error()))
		return
	}
	st.recovery = s.recoveryActionOf(st, v)
}

// onKmsgLine turns an "NVRM: Xid" line into an occurrence on the GPU at its PCI address.
func (s *nvmlBackend) onKmsgLine(line string) {
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

// simulatedKernelLog is the simulated driver's own kernel log.
type simulatedKernelLog interface{ KernelLog() (*os.File, error) }

// startKmsg follows the kernel log. The simulated backend reads its simulated driver's log
// unless xid::kmsg_path names a file: the machine's own kernel log has nothing to do with
// simulated GPUs.
func (s *nvmlBackend) startKmsg() {
	x := s.cfg.XID
	if !x.Kmsg {
		return
	}
	path := x.KmsgPath
	var f *os.File
	var err error
	switch sim, ok := s.lib.Interface.(simulatedKernelLog); {
	case path == "" && ok:
		path = "simulated"
		f, err = sim.KernelLog()
	case path == "" && s.cfg.Backend == BackendSimulated:
		return
	default:
		if path == "" {
			path = filepath.Join(s.cfg.RootPath, "dev", "kmsg")
		}
		f, err = openKmsg(path)
	}
	if err != nil {
		s.logger.Warn("The kernel log cannot be read: XIDs come from NVML events only (run as root or give CAP_SYSLOG, or set xid::kmsg_path)", zap.String("path", path), zap.Error(err))
		return
	}
	s.kmsg = f
	k := &kmsgReader{file: f, clock: s.clock, poll: time.Second, logger: s.logger, onLine: s.onKmsgLine}
	s.wg.Go(func() {
		k.run(s.stop)
	})
}
