// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// profile is a mock DGX server plus the readings its mocks do not model, from the products'
// data sheets: the highest clocks, the range the power limit can be set in, PCIe, and whether
// the GPU has GPM (Hopper and newer); NVLink and the fabric are the scenario's profile's.
type profile struct {
	gpu                  gpus.Config
	newServer            func(...gpus.Config) *server.Server
	smClockMHz           uint32
	memClockMHz          uint32
	powerMinW, powerMaxW uint32
	pcieGen              int
	gpm                  bool
	// nvLinks and fabric are gpuscenario.Profile's, set by New.
	nvLinks int
	fabric  bool
}

var profiles = map[string]profile{
	"dgxa100": {gpu: gpus.A100_SXM4_40GB, newServer: dgxa100.NewWithGPUs, smClockMHz: 1410, memClockMHz: 1215, powerMinW: 100, powerMaxW: 400, pcieGen: 4},
	"dgxh100": {gpu: gpus.H100_SXM5_80GB, newServer: dgxh100.NewWithGPUs, smClockMHz: 1980, memClockMHz: 2619, powerMinW: 200, powerMaxW: 700, pcieGen: 5, gpm: true},
	"dgxh200": {gpu: gpus.H200_SXM5_141GB, newServer: dgxh200.NewWithGPUs, smClockMHz: 1980, memClockMHz: 3201, powerMinW: 200, powerMaxW: 700, pcieGen: 5, gpm: true},
	"dgxb200": {gpu: gpus.B200_SXM5_180GB, newServer: dgxb200.NewWithGPUs, smClockMHz: 1965, memClockMHz: 3996, powerMinW: 200, powerMaxW: 1000, pcieGen: 5, gpm: true},
}

// Load reads an NVIDIA scenario for the simulated backend: an AMD one's GPUs are driver files,
// which cmd/demonode writes for the amdgpu backend.
func Load(path string) (*gpuscenario.Scenario, error) {
	sc, err := gpuscenario.Load(path)
	if err == nil && sc.Vendor() != gpuscenario.NVIDIA {
		err = fmt.Errorf("profile: %s is an AMD node, which the simulated backend does not play: run it with cmd/demonode and backend amdgpu", sc.Profile)
	}
	return sc, err
}

// Server is an nvml.Interface on a go-nvml mock server. It answers the calls the gpu receiver
// makes from the scenario; every other call goes to the mock and behaves as go-nvml's mocks do.
//
// The simulated calls are methods of Server and Device rather than the mocks' XxxFunc fields:
// the moq mocks append every call's arguments to an in-memory log, which would grow without
// bound in a collector that runs the simulation for days.
type Server struct {
	*server.Server
	devices []*Device
	// clock is the scenario's time: the machine's in the collector, a hand-moved one in tests.
	clock clock.Clock
	start time.Time
	// hostRoot is where the host's / is, for the /proc entries of while_running processes.
	hostRoot string

	closed    chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	// events are the scenario's NVML events in time order: its XIDs and its recovery actions'
	// starts and ends.
	events []*pendingEvent
	// kernelLog is the write end of KernelLog's pipe, nil until asked for.
	kernelLog *os.File

	// gpmLive counts the GPM sample buffers allocated and not freed; gpmMisused the calls made
	// on a buffer after it was freed (a use after free on real NVML), and frees of a freed one.
	gpmLive, gpmMisused atomic.Int64
}

type pendingEvent struct {
	at        time.Duration
	eventType uint64
	fault     *gpuscenario.Fault
	device    *Device
	delivered bool
}

var _ nvml.Interface = (*Server)(nil)

// Option changes how New builds the server.
type Option func(*Server)

// WithHostRoot sets where the host's / is mounted (the gpu receiver's root_path), for the /proc
// entries of while_running processes; the default is /.
func WithHostRoot(root string) Option {
	return func(s *Server) { s.hostRoot = root }
}

// New builds the simulated server; the scenario's time 0 is the clock's time now. Nothing in it
// wakes on its own: a blocked call sleeps until its scenario time is due.
//
// sc must be an NVIDIA scenario (Load checks it).
func New(sc *gpuscenario.Scenario, clk clock.Clock, opts ...Option) *Server {
	p := profiles[sc.Profile]
	shape, _ := sc.ProfileOf()
	p.nvLinks, p.fabric = shape.NVLinks, shape.Fabric
	cfg := p.gpu
	if sc.Model != "" {
		cfg.Name = sc.Model
	}
	if sc.MemoryMiB != 0 {
		cfg.MemoryMB = sc.MemoryMiB
	}
	s := &Server{
		Server:   p.newServer(gpus.Multiple(sc.GPUs, cfg)...),
		clock:    clk,
		start:    clk.Now(),
		hostRoot: "/",
		closed:   make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	for i, md := range s.Devices {
		d := newDevice(s, sc, p, i, md.(*server.Device))
		s.devices = append(s.devices, d)
		s.Devices[i] = d
	}
	for i := range sc.Faults {
		f := &sc.Faults[i]
		d := s.devices[f.GPU]
		switch f.Kind {
		case gpuscenario.FaultXID:
			s.events = append(s.events, &pendingEvent{at: f.At, eventType: nvml.EventTypeXidCriticalError, fault: f, device: d})
		case gpuscenario.FaultRecoveryAction:
			// The driver signals each change of the action: when it is set and when it clears.
			s.events = append(s.events, &pendingEvent{at: f.At, eventType: nvml.EventTypeGpuRecoveryAction, fault: f, device: d})
			if f.Duration > 0 {
				s.events = append(s.events, &pendingEvent{at: f.At + f.Duration, eventType: nvml.EventTypeGpuRecoveryAction, fault: f, device: d})
			}
		}
	}
	slices.SortStableFunc(s.events, func(a, b *pendingEvent) int { return cmp.Compare(a.at, b.at) })
	return s
}

// Close releases every call blocked by a hang fault and every event wait.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.mu.Lock()
		if s.kernelLog != nil {
			s.kernelLog.Close()
		}
		s.mu.Unlock()
	})
}

func (s *Server) elapsed() time.Duration {
	return s.clock.Now().Sub(s.start)
}

// block holds the caller until the scenario reaches until, or the server closes.
func (s *Server) block(until time.Duration) {
	due := s.clock.TimerAt(s.start.Add(until))
	defer due.Stop()
	select {
	case <-s.closed:
	case <-due.C():
	}
}

// hostProcessRuns tells whether pid has a /proc entry on the host.
func (s *Server) hostProcessRuns(pid uint32) bool {
	return unix.Access(filepath.Join(s.hostRoot, "proc", strconv.FormatUint(uint64(pid), 10)), unix.F_OK) == nil
}

// DeviceGetCount is the number of GPUs of the scenario.
func (s *Server) DeviceGetCount() (int, nvml.Return) {
	return len(s.devices), nvml.SUCCESS
}

// DeviceGetHandleByIndex returns the simulated GPU at index.
func (s *Server) DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return) {
	if index < 0 || index >= len(s.devices) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return s.devices[index], nvml.SUCCESS
}

// EventSetCreate returns an event set that delivers the scenario's xid and recovery_action
// faults.
func (s *Server) EventSetCreate() (nvml.EventSet, nvml.Return) {
	return &eventSet{srv: s, masks: map[*Device]uint64{}}, nvml.SUCCESS
}

// nextEvent hands out a due event of a GPU registered for its type, once. When none is due it
// returns when the next one will be (ok false, more true), or more false if none is left.
func (s *Server) nextEvent(masks map[*Device]uint64) (ev nvml.EventData, ok bool, next time.Duration, more bool) {
	t := s.elapsed()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.events {
		if x.delivered || masks[x.device]&x.eventType == 0 {
			continue
		}
		if x.at > t {
			if !more || x.at < next {
				next, more = x.at, true
			}
			continue
		}
		x.delivered = true
		// 0xFFFFFFFF: the event concerns the whole GPU, not a MIG instance. A recovery action
		// event carries no data (NVML's eventData is 0 for every event but an XID).
		ev := nvml.EventData{Device: x.device, EventType: x.eventType, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
		if x.eventType == nvml.EventTypeXidCriticalError {
			ev.EventData = x.fault.XID
		}
		return ev, true, 0, false
	}
	return nvml.EventData{}, false, next, more
}

// KernelLog is the simulated driver's kernel log: a pipe that carries the "NVRM: Xid" line of
// each xid fault as its NVML event is delivered, as a real driver logs both. The caller reads it
// as it would /dev/kmsg and closes it when done.
func (s *Server) KernelLog() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kernelLog != nil {
		s.kernelLog.Close()
	}
	s.kernelLog = w
	return r, nil
}

// kernelLogWait bounds a write to the kernel log: a reader that stopped reading loses lines
// instead of stopping the event set.
const kernelLogWait = time.Second

// logXID writes an XID's kernel log line, with the fault's message or a generic one.
func (s *Server) logXID(ev nvml.EventData) {
	s.mu.Lock()
	w := s.kernelLog
	s.mu.Unlock()
	d, ok := ev.Device.(*Device)
	if w == nil || !ok {
		return
	}
	_ = w.SetWriteDeadline(time.Now().Add(kernelLogWait))
	_, _ = w.WriteString(d.xidLine(ev.EventData))
}

// xidLine is the driver's kernel log line of an XID on the GPU, with the fault's message or a
// generic one.
func (d *Device) xidLine(code uint64) string {
	msg := "pid='<unknown>', name=<unknown>, simulated"
	for _, x := range d.faults {
		if x.Kind == gpuscenario.FaultXID && x.XID == code && x.Message != "" {
			msg = x.Message
		}
	}
	return fmt.Sprintf("NVRM: Xid (PCI:%s): %d, %s\n", fmtBusID(d.pci, "%04x:%02x:%02x"), code, msg)
}

// eventSet implements Wait and Free; the embedded mock covers the rest of nvml.EventSet.
type eventSet struct {
	mock.EventSet
	srv   *Server
	mu    sync.Mutex
	masks map[*Device]uint64
}

func (e *eventSet) register(d *Device, mask uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.masks[d] |= mask
}

// Wait returns the next due event, or ERROR_TIMEOUT after timeoutMs as NVML does. It sleeps
// until the next event is due or the timeout, whichever is first.
func (e *eventSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	timeout := e.srv.clock.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer timeout.Stop()
	for {
		e.mu.Lock()
		ev, ok, next, more := e.srv.nextEvent(e.masks)
		e.mu.Unlock()
		if ok {
			if ev.EventType == nvml.EventTypeXidCriticalError {
				e.srv.logXID(ev)
			}
			return ev, nvml.SUCCESS
		}
		if !e.sleep(timeout, more, next) {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
}

// sleep waits until the next event is due (when there is one left, more) and reports whether
// it is; false when the wait timed out or the server closed first.
func (e *eventSet) sleep(timeout clock.Timer, more bool, next time.Duration) bool {
	var due <-chan time.Time // nil: no event left to wait for
	if more {
		t := e.srv.clock.TimerAt(e.srv.start.Add(next))
		defer t.Stop()
		due = t.C()
	}
	select {
	case <-e.srv.closed:
		return false
	case <-timeout.C():
		return false
	case <-due:
		return true
	}
}

// Free releases nothing: the set holds no resources.
func (*eventSet) Free() nvml.Return {
	return nvml.SUCCESS
}

func fmtBusID(p nvml.PciInfo, format string) string {
	return fmt.Sprintf(format, p.Domain, p.Bus, p.Device)
}

// copyCString fills an NVML char array, leaving the terminating NUL.
func copyCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}
