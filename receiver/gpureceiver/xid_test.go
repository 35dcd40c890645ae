// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// Kernel log lines as drivers print them; the dmesg and syslog forms have other prefixes.
var xidLines = []struct {
	line string
	want kmsgXID
}{
	{
		"4,1093,52473100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		kmsgXID{pciAddr{0, 0x3b, 0}, 79, "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
	},
	{
		"[ 1234.567890] NVRM: Xid (PCI:0000:b3:00): 13, pid=4242, name=python, Graphics Exception: ESR 0x405840=0x3e",
		kmsgXID{pciAddr{0, 0xb3, 0}, 13, "pid=4242, name=python, Graphics Exception: ESR 0x405840=0x3e"},
	},
	{
		"Nov 30 12:00:01 gpu-node-07 kernel: NVRM: Xid (0001:1a:02.0): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
		kmsgXID{pciAddr{1, 0x1a, 2}, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."},
	},
	{
		"NVRM: Xid (PCI:0008:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000000 0x00000000)",
		kmsgXID{pciAddr{8, 1, 0}, 145, "RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000000 0x00000000)"},
	},
	{"NVRM: Xid (3b:00): 119", kmsgXID{pciAddr{0, 0x3b, 0}, 119, ""}},
}

func TestParseXIDLine(t *testing.T) {
	for _, tt := range xidLines {
		got, ok := parseXIDLine(tt.line)
		require.True(t, ok, tt.line)
		assert.Equal(t, tt.want, got, tt.line)
	}
	for _, line := range []string{
		"",
		"NVRM: GPU at PCI:0000:3b:00: GPU-0d1a2b3c has fallen off the bus.",
		"NVRM: Xid (PCI:0000:3b:00: 79, no closing parenthesis",
		"NVRM: Xid (PCI:0000:3b:00): 0, code zero",
		"NVRM: Xid (PCI:0000:3b:00): seventy-nine",
		"NVRM: Xid (PCI:0000:3bb:00): 79, bus over 0xff",
		"NVRM: Xid (PCI:0000:3b:20): 79, device over 0x1f",
		"NVRM: Xid (PCI:zz:3b:00): 79, not hex",
		"NVRM: Xid (PCI:0000:3b:00): 99999999999, too large",
	} {
		_, ok := parseXIDLine(line)
		assert.False(t, ok, line)
	}
}

// FuzzParseXIDLine: no input panics, and what parses is well-formed and survives a round trip
// through the driver's own format.
func FuzzParseXIDLine(f *testing.F) {
	for _, tt := range xidLines {
		f.Add(tt.line)
	}
	f.Add("NVRM: Xid (PCI:0000:3b:00): 79,, , x")
	for _, capture := range []string{"dmesg-with-xid-119.log", "kmsg.1.log"} {
		for _, line := range captureLines(f, capture) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		x, ok := parseXIDLine(line)
		if !ok {
			return
		}
		if x.code == 0 || x.code > 1<<32-1 || x.pci.bus > 0xff || x.pci.device > 0x1f {
			t.Fatalf("out of range: %+v from %q", x, line)
		}
		again, ok := parseXIDLine(fmt.Sprintf("NVRM: Xid (PCI:%s): %d, %s", formatPCI(x.pci), x.code, x.message))
		if !ok || again != x {
			t.Fatalf("round trip of %q: %+v became %+v (%v)", line, x, again, ok)
		}
	})
}

// logSink collects the log records a tracker emits.
type logSink struct {
	mu   sync.Mutex
	logs []plog.Logs
}

func (s *logSink) emit(l plog.Logs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, l)
}

func (s *logSink) records() []plog.LogRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []plog.LogRecord
	for _, l := range s.logs {
		for i := range l.ResourceLogs().Len() {
			sls := l.ResourceLogs().At(i).ScopeLogs()
			for j := range sls.Len() {
				for k := range sls.At(j).LogRecords().Len() {
					out = append(out, sls.At(j).LogRecords().At(k))
				}
			}
		}
	}
	return out
}

func newTestTracker(clock *clock.Fake, sink *logSink, overrides map[string]xid.Info) *xidTracker {
	cfg := testConfig()
	return &xidTracker{
		table:        xid.New(overrides),
		dedupWindow:  2 * time.Second,
		healthWindow: time.Hour,
		clock:        clock,
		logger:       zap.NewNop(),
		resource:     func(*gpuIdentity) pcommon.Resource { return pcommon.NewResource() },
		emit:         sink.emit,
		lb:           metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: cfg.Events, ResourceAttributes: cfg.ResourceAttributes}, receivertest.NewNopSettings(metadata.Type)),
		counts:       map[string]map[uint64]int64{},
		health:       map[string][]healthMark{},
	}
}

// TestXIDDedup: one XID seen by both sources counts once; repeats from one source, and the
// same code after the window, count again.
func TestXIDDedup(t *testing.T) {
	clock := newFakeClock()
	sink := &logSink{}
	tr := newTestTracker(clock, sink, nil)
	a := &gpuIdentity{index: 3, uuid: "GPU-a", pciBusID: "00000000:04:00.0"}
	b := &gpuIdentity{index: 4, uuid: "GPU-b"}
	nvmlXID := func(g *gpuIdentity, code uint64) xidOccurrence {
		return xidOccurrence{gpu: g, code: code, source: metadata.AttributeSourceNvml}
	}
	kmsgXID := func(g *gpuIdentity, code uint64) xidOccurrence {
		return xidOccurrence{gpu: g, code: code, source: metadata.AttributeSourceKmsg, message: "pid=1"}
	}

	tr.add(nvmlXID(a, 79))
	clock.Advance(500 * time.Millisecond)
	tr.add(kmsgXID(a, 79)) // the same occurrence
	tr.add(kmsgXID(a, 79)) // a second one: the NVML event was matched already
	tr.add(kmsgXID(b, 79)) // another GPU
	tr.add(nvmlXID(a, 13)) // another code
	clock.Advance(3 * time.Second)
	tr.add(nvmlXID(a, 79)) // after the window: not the unmatched kmsg line's twin

	codes, counts := tr.countsOf("GPU-a")
	assert.Equal(t, []uint64{13, 79}, codes)
	assert.Equal(t, []int64{1, 3}, counts)
	_, counts = tr.countsOf("GPU-b")
	assert.Equal(t, []int64{1}, counts)
	assert.Len(t, sink.records(), 5)
}

// TestXIDNVLinkVerdict: an NVLink XID's kernel log line says whether it was fatal. A Nonfatal
// line stays a warning; a Fatal one makes the GPU's XID health fatal, also when NVML's event,
// which has no verdict, came first, and is still counted once.
func TestXIDNVLinkVerdict(t *testing.T) {
	clock := newFakeClock()
	sink := &logSink{}
	tr := newTestTracker(clock, sink, nil)
	src := &nvmlBackend{xids: tr}
	a := &gpuIdentity{index: 0, uuid: "GPU-a", pciBusID: "00000000:04:00.0", pci: pciAddr{bus: 4}}
	b := &gpuIdentity{index: 1, uuid: "GPU-b", pciBusID: "00000000:05:00.0", pci: pciAddr{bus: 5}}
	src.identities.Store(&[]*gpuIdentity{a, b})

	src.onKmsgLine("NVRM: Xid (PCI:0000:04:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02 (0x004505c6 0x00000000)")
	assert.Equal(t, int64(healthWarning), tr.healthOf("GPU-a"))

	tr.add(xidOccurrence{gpu: b, code: 149, source: metadata.AttributeSourceNvml})
	assert.Equal(t, int64(healthWarning), tr.healthOf("GPU-b"), "NVML's event alone: the table's severity")
	clock.Advance(500 * time.Millisecond)
	src.onKmsgLine("NVRM: Xid (PCI:0000:05:00): 149, NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x00086226 0x00000001)")
	assert.Equal(t, int64(healthFatal), tr.healthOf("GPU-b"))
	_, counts := tr.countsOf("GPU-b")
	assert.Equal(t, []int64{1}, counts, "one occurrence, seen by both sources")
	recs := sink.records()
	require.Len(t, recs, 3)
	assert.Equal(t, "warning", recs[0].SeverityText())
	assert.Equal(t, "fatal", recs[2].SeverityText())
}

// TestXIDLogRecord: the record carries the table's meaning, severity and action, overridable.
func TestXIDLogRecord(t *testing.T) {
	clock := newFakeClock()
	sink := &logSink{}
	tr := newTestTracker(clock, sink, map[string]xid.Info{
		"13":  {Severity: "fatal"},
		"999": {Meaning: "lab code"},
		"31":  {Resolution: "reset_gpu"},
		"43":  {Action: "call the on-call"},
	})
	gpu := &gpuIdentity{index: 3, uuid: "GPU-a", pciBusID: "00000000:04:00.0"}
	tr.add(xidOccurrence{gpu: gpu, pci: gpu.pciBusID, code: 79, source: metadata.AttributeSourceKmsg, message: "GPU has fallen off the bus."})
	tr.add(xidOccurrence{gpu: gpu, code: 13, source: metadata.AttributeSourceNvml})
	tr.add(xidOccurrence{gpu: gpu, code: 999, source: metadata.AttributeSourceNvml})
	tr.add(xidOccurrence{gpu: gpu, code: 4242, source: metadata.AttributeSourceNvml})
	tr.add(xidOccurrence{gpu: gpu, code: 31, source: metadata.AttributeSourceNvml})
	tr.add(xidOccurrence{gpu: gpu, code: 43, source: metadata.AttributeSourceNvml})

	recs := sink.records()
	require.Len(t, recs, 6)
	lr := recs[0]
	assert.Equal(t, "gpu.xid", lr.EventName())
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	assert.Equal(t, "fatal", lr.SeverityText())
	assert.Equal(t, "XID 79 on GPU 3 (00000000:04:00.0): GPU has fallen off the bus. Action: "+xid.ResolutionReboot.Action(), lr.Body().Str())
	assert.Equal(t, map[string]any{
		"xid": "79", "xid_severity": "fatal", "resolution": "reboot", "xid_meaning": "GPU has fallen off the bus",
		"xid_action":  xid.ResolutionReboot.Action(),
		"xid_message": "GPU has fallen off the bus.", "source": "kmsg", "pci_bus_id": "00000000:04:00.0",
	}, lr.Attributes().AsRaw())

	// 13 is a warning in the shipped table, made fatal by the override.
	assert.Equal(t, plog.SeverityNumberError, recs[1].SeverityNumber())
	assert.Equal(t, "Graphics engine exception", attr(recs[1], "xid_meaning"))
	// 999 is not in the table: the override's meaning, the unknown entry's severity and action.
	assert.Equal(t, "lab code", attr(recs[2], "xid_meaning"))
	assert.Equal(t, plog.SeverityNumberWarn, recs[2].SeverityNumber())
	assert.Equal(t, xid.ResolutionUnknown.Action(), attr(recs[3], "xid_action"))
	assert.Equal(t, "unknown", attr(recs[3], "resolution"))
	// A new resolution brings its own wording; an action override keeps the resolution.
	assert.Equal(t, "reset_gpu", attr(recs[4], "resolution"))
	assert.Equal(t, xid.ResolutionResetGPU.Action(), attr(recs[4], "xid_action"))
	assert.Equal(t, "restart_app", attr(recs[5], "resolution"))
	assert.Equal(t, "call the on-call", attr(recs[5], "xid_action"))
}

func attr(lr plog.LogRecord, key string) string {
	v, _ := lr.Attributes().Get(key)
	return v.Str()
}

// TestXIDHealthWindow: an XID sets its severity on gpu_health{condition="xid"} for
// health_window; an info XID leaves the GPU healthy.
func TestXIDHealthWindow(t *testing.T) {
	clock := newFakeClock()
	tr := newTestTracker(clock, &logSink{}, nil)
	gpu := &gpuIdentity{uuid: "GPU-a"}
	tr.add(xidOccurrence{gpu: gpu, code: 45, source: metadata.AttributeSourceNvml})
	assert.Equal(t, int64(healthOK), tr.healthOf("GPU-a"))
	tr.add(xidOccurrence{gpu: gpu, code: 48, source: metadata.AttributeSourceNvml})
	clock.Advance(30 * time.Minute)
	tr.add(xidOccurrence{gpu: gpu, code: 31, source: metadata.AttributeSourceNvml})
	assert.Equal(t, int64(healthFatal), tr.healthOf("GPU-a"))
	clock.Advance(45 * time.Minute)
	assert.Equal(t, int64(healthWarning), tr.healthOf("GPU-a"))
	clock.Advance(time.Hour)
	assert.Equal(t, int64(healthOK), tr.healthOf("GPU-a"))
}

// TestXIDFromNVMLEvents: XIDs injected into the simulated event set are counted on their GPU,
// logged, and XID 79 takes its GPU down while the others keep reporting.
func TestXIDFromNVMLEvents(t *testing.T) {
	clock := newFakeClock()
	srv := writeScenario(t, clock, `
profile: dgxh100
faults:
  - {at: 5s, gpu: 3, kind: xid, xid: 79}
  - {at: 5s, gpu: 1, kind: xid, xid: 13}
  - {at: 6s, gpu: 1, kind: xid, xid: 13}
`)
	sink := &logSink{}
	src := startScraper(t, testConfig(), srv, clock, sink.emit)
	clock.Advance(10 * time.Second)
	poll.Until(t, 10*time.Second, "the three XIDs to be logged", func() bool { return len(sink.records()) == 3 })

	md := src.scrape()
	gpu3, gpu1 := gpuResource(t, md, "3"), gpuResource(t, md, "1")
	// The counter carries the table's resolution class, so alerts select by class.
	assert.Equal(t, int64(1), value(t, gpu3, "gpu_xid_errors_total", "xid", "79", "resolution", "reboot"))
	assert.Equal(t, int64(0), value(t, gpu3, "gpu_up"))
	assert.Equal(t, int64(healthFatal), value(t, gpu3, "gpu_health", "condition", "xid"))
	assert.Equal(t, int64(2), value(t, gpu1, "gpu_xid_errors_total", "xid", "13", "resolution", "restart_app"))
	assert.Equal(t, int64(1), value(t, gpu1, "gpu_up"))
	assert.Equal(t, int64(healthWarning), value(t, gpu1, "gpu_health", "condition", "xid"))
	assert.Empty(t, points(gpuResource(t, md, "0"), "gpu_xid_errors_total"))
	assertUp(t, md, map[string]int64{"0": 1, "2": 1, "7": 1})
}

// TestXIDFromKmsg: kernel log lines appended to a file after start are matched to GPUs by PCI
// address; a line for an unknown address is logged but not counted on any GPU.
func TestXIDFromKmsg(t *testing.T) {
	clock := newFakeClock()
	srv := simServer(t, "dgxa100.yaml", clock)
	sink := &logSink{}
	src := startScraper(t, testConfig(), srv, clock, sink.emit)
	path := filepath.Join(t.TempDir(), "kern.log")
	require.NoError(t, os.WriteFile(path, []byte("NVRM: Xid (PCI:0000:04:00): 31, logged before the start, skipped\n"), 0o600))
	f, err := openKmsg(path)
	require.NoError(t, err)
	defer f.Close()
	// The reader's pauses are on a clock of their own, moved while the test waits for the lines:
	// the scenario's stays where it is.
	kmsgClock := newFakeClock()
	k := &kmsgReader{file: f, clock: kmsgClock, poll: time.Second, logger: zap.NewNop(), onLine: src.onKmsgLine}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); k.run(stop) }()

	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("6,1,1,-;NVRM: Xid (PCI:0000:04:00): 94, pid=5151, name=python, Ch 00000008\nnot an xid line\n[ 1.0] NVRM: Xid (PCI:0000:7f:00): 79, no such GPU\nNVRM: Xid (PCI:0000:04:00): 94, pid=5151")
	require.NoError(t, err)
	_, err = w.WriteString(", name=python, second one, written in two parts\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	poll.Until(t, 10*time.Second, "the three kernel log XIDs to be logged", func() bool {
		kmsgClock.Advance(k.poll)
		return len(sink.records()) == 3
	})
	close(stop)
	waitOrFail(t, func() { <-done }, "the kernel log reader did not stop")

	md := src.scrape()
	assert.Equal(t, int64(2), value(t, gpuResource(t, md, "3"), "gpu_xid_errors_total", "xid", "94"))
	assert.Equal(t, "00000000:7F:00.0", attr(sink.records()[1], "pci_bus_id"))
	assert.Equal(t, "pid=5151, name=python, second one, written in two parts", attr(sink.records()[2], "xid_message"))
}

// TestKmsgCloseWakesReader: on /dev/kmsg a read blocks until the next kernel record; closing the
// file at shutdown must wake it. A pipe of the test's own blocks the same way (Go's poller holds
// both), so the test needs neither /dev/kmsg nor the rights to read it.
func TestKmsgCloseWakesReader(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	k := &kmsgReader{file: r, clock: newFakeClock(), poll: time.Second, logger: zap.NewNop(), onLine: func(string) {}}
	done := make(chan struct{})
	go func() { defer close(done); k.run(make(chan struct{})) }()
	require.NoError(t, r.Close())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the kernel log did not wake its blocked reader")
	}
}

// TestXIDEnumsMatchMetadata: the XID table's severities and resolutions are the values
// metadata.yaml declares for the xid_severity and resolution attributes, both ways.
func TestXIDEnumsMatchMetadata(t *testing.T) {
	var severities, resolutions []string
	for _, s := range xid.Severities {
		severities = append(severities, string(s))
	}
	for _, r := range xid.Resolutions {
		resolutions = append(resolutions, string(r))
	}
	assert.ElementsMatch(t, slices.Collect(maps.Keys(metadata.MapAttributeXidSeverity)), severities)
	assert.ElementsMatch(t, slices.Collect(maps.Keys(metadata.MapAttributeXidResolution)), resolutions)
	assert.ElementsMatch(t, xid.Severities, slices.Collect(maps.Keys(severityLevels)), "a gpu_health level for each severity")
}

// heldWait is an NVML whose event wait blocks until the test lets it return, as a real
// driver's does: nothing but an event or its timeout ends it.
type heldWait struct {
	*simulated.Server
	waits   chan uint32   // each wait's timeout, in ms
	unblock chan struct{} // closed by the test: the wait returns (as if its timeout passed)
	mu      sync.Mutex
	calls   []string // Free and Shutdown, in order
}

type heldSet struct {
	mock.EventSet
	lib *heldWait
}

func (h *heldWait) EventSetCreate() (nvml.EventSet, nvml.Return) {
	return &heldSet{lib: h}, nvml.SUCCESS
}

func (s *heldSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	s.lib.waits <- timeoutMs
	<-s.lib.unblock
	return nvml.EventData{}, nvml.ERROR_TIMEOUT
}

func (s *heldSet) Free() nvml.Return {
	s.lib.record("Free")
	return nvml.SUCCESS
}

func (h *heldWait) Shutdown() nvml.Return {
	h.record("Shutdown")
	return nvml.SUCCESS
}

func (h *heldWait) record(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *heldWait) recorded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// TestEventWatcherSleepsUntilDue: the XID watcher makes one long NVML wait and no other call
// while no event comes (no polling), shutdown returns without waiting for that wait, and the
// event set is freed and NVML shut down only once the wait has returned, in that order.
func TestEventWatcherSleepsUntilDue(t *testing.T) {
	clock := newFakeClock()
	lib := &heldWait{Server: simServer(t, "dgxa100.yaml", clock), waits: make(chan uint32, 10), unblock: make(chan struct{})}
	src := newNVMLNode(settingsFor(testConfig(), clock), lib, func() {})
	src.start(nil)
	select {
	case timeout := <-lib.waits:
		assert.Equal(t, uint32(eventWait/time.Millisecond), timeout)
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher made no event wait")
	}
	src.scrape()

	waitOrFail(t, src.shutdown, "shutdown waited for the event wait, which nothing but an event or its timeout ends")
	assert.Empty(t, lib.recorded(), "neither the set freed nor NVML shut down under the wait")
	close(lib.unblock)
	waitOrFail(t, src.watcher.Wait, "the watcher did not end once its wait returned")
	assert.Equal(t, []string{"Free", "Shutdown"}, lib.recorded())
	assert.Empty(t, lib.waits, "one wait, then the stop: no second wait")
}
