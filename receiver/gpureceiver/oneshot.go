// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/nodename"
)

// LateCall is an NVML call that passed call_timeout: on GPU (its minor number and UUID, which
// is empty while the GPU is being identified), or on the library itself when GPU is -1 (Init,
// the device count).
type LateCall struct {
	GPU  int
	UUID string
	Call string
}

// OneShot is one collection of the receiver for the node check (cmd/gpucheck): the backend the
// receiver would run, set up once without retries, and one collection made as the receiver
// makes it, whose XIDs are those of the kernel log since boot rather than those logged after a
// start.
type OneShot struct {
	backend backend
	scraper *gpuScraper
	nvml    *nvmlBackend // nil for the amdgpu backend
	// kernelLog: read the kernel log since boot (xid::kmsg).
	kernelLog bool

	mu   sync.Mutex
	xids plog.Logs
}

// OneShotResult is what a OneShot collected.
type OneShotResult struct {
	// Metrics are the collection's, as the receiver emits them.
	Metrics pmetric.Metrics
	// XIDs are the gpu.xid log records of the kernel log since boot (NVML backends, with
	// xid::kmsg).
	XIDs plog.Logs
	// KernelLogErr is why the kernel log could not be read: the XIDs are then unknown.
	KernelLogErr error
}

// NewOneShot makes the backend cfg (valid) names. onLate, if set, is told of each NVML call as it
// passes call_timeout, from the goroutine that gave up on it.
func NewOneShot(cfg *Config, set receiver.Settings, onLate func(LateCall)) (*OneShot, error) {
	c := *cfg
	// XIDs come from the kernel log since boot (Collect); NVML's events have only later ones.
	c.XID.NVMLEvents, c.XID.Kmsg = false, false
	nodeName, err := nodename.Resolve(c.NodeName)
	if err != nil {
		return nil, err
	}
	ss := scraperSettings{cfg: &c, set: set, nodeName: nodeName, clock: clock.Real{}}
	b, err := newBackend(ss, resolveBackend(&c))
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", c.Backend, err)
	}
	o := &OneShot{backend: b, scraper: newScraper(ss, b), xids: plog.NewLogs(), kernelLog: cfg.XID.Kmsg}
	if nb, ok := b.(*nvmlBackend); ok {
		o.nvml = nb
		nb.onLate, nb.lib.onLate = onLate, onLate
	}
	return o, nil
}

// Collect sets the backend up (one try), reads the kernel log since boot (xid::kmsg) and makes
// one collection. Call it once.
func (o *OneShot) Collect() OneShotResult {
	o.backend.start(func(ld plog.Logs) {
		o.mu.Lock()
		defer o.mu.Unlock()
		ld.ResourceLogs().MoveAndAppendTo(o.xids.ResourceLogs())
	})
	var res OneShotResult
	if o.kernelLog && o.nvml != nil && o.nvml.lib.ready.Load() {
		res.KernelLogErr = o.nvml.readKernelLogSinceBoot()
	}
	res.Metrics = o.scraper.scrape()
	o.mu.Lock()
	res.XIDs = o.xids
	o.mu.Unlock()
	return res
}

// Close lets go of the backend.
func (o *OneShot) Close() { o.backend.shutdown() }

// simulatedBootLog is the simulated driver's kernel log since boot.
type simulatedBootLog interface{ BootLog() io.Reader }

// readKernelLogSinceBoot counts the XIDs of the kernel log since boot: /dev/kmsg from its
// oldest record, xid::kmsg_path whole, or the simulated driver's.
func (s *nvmlBackend) readKernelLogSinceBoot() error {
	path := s.cfg.XID.KmsgPath
	sim, simulated := s.lib.Interface.(simulatedBootLog)
	switch {
	case path == "" && simulated:
		return eachLine(sim.BootLog(), s.onKmsgLine)
	case path == "" && s.cfg.Backend == BackendSimulated:
		return nil
	case path == "":
		path = filepath.Join(s.cfg.RootPath, "dev", "kmsg")
	}
	f, err := openNonblocking(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return eachLine(f, s.onKmsgLine)
}

// nonblockingFile reads a file opened O_NONBLOCK with read(2) itself: os.File would wait in
// the poller where /dev/kmsg answers EAGAIN, which is its end.
type nonblockingFile struct {
	fd   int
	path string
}

func openNonblocking(path string) (*nonblockingFile, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &nonblockingFile{fd: fd, path: path}, nil
}

// Read reads one /dev/kmsg record, or a file's next bytes; io.EOF at the end of either.
func (f *nonblockingFile) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EPIPE):
			// /dev/kmsg overwrote the records before the one asked for: reading goes on from
			// the oldest it still has.
		case errors.Is(err, unix.EAGAIN):
			return 0, io.EOF
		case err != nil:
			return 0, &os.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0:
			return 0, io.EOF
		default:
			return n, nil
		}
	}
}

func (f *nonblockingFile) Close() error { return unix.Close(f.fd) }

// eachLine hands each line of r to onLine, a line cut at maxKmsgLine.
func eachLine(r io.Reader, onLine func(string)) error {
	// A /dev/kmsg read needs room for a whole record, or it fails with EINVAL.
	buf := make([]byte, maxKmsgLine)
	var line []byte
	for {
		n, err := r.Read(buf)
		for chunk := buf[:n]; len(chunk) > 0; {
			i := bytes.IndexByte(chunk, '\n')
			part := chunk
			if i >= 0 {
				part = chunk[:i+1]
			}
			if len(line)+len(part) <= maxKmsgLine {
				line = append(line, part...)
			}
			chunk = chunk[len(part):]
			if i >= 0 {
				onLine(string(line))
				line = line[:0]
			}
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				onLine(string(line))
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}
