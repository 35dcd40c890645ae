// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// pciAddr is a GPU's PCI location, the key that ties a kernel log line to an NVML device.
type pciAddr struct {
	domain, bus, device uint32
}

// kmsgXID is an XID parsed from a kernel log line.
type kmsgXID struct {
	pci     pciAddr
	code    uint64
	message string
}

const xidMarker = "NVRM: Xid ("

// parseXIDLine reads lines such as
//
//	4,1093,52473100,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	[ 1234.5678] NVRM: Xid (0000:3b:00): 13, pid=4242, name=python, Graphics Exception: ...
//
// whatever comes before the marker (a /dev/kmsg header, a syslog or dmesg prefix).
func parseXIDLine(line string) (kmsgXID, bool) {
	_, rest, found := strings.Cut(line, xidMarker)
	if !found {
		return kmsgXID{}, false
	}
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return kmsgXID{}, false
	}
	pci, ok := parsePCI(rest[:end])
	if !ok {
		return kmsgXID{}, false
	}
	rest = strings.TrimLeft(strings.TrimPrefix(rest[end+1:], ":"), " ")
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	code, err := strconv.ParseUint(rest[:digits], 10, 32)
	if err != nil || code == 0 {
		return kmsgXID{}, false
	}
	msg := strings.TrimSpace(rest[digits:])
	msg = strings.TrimSpace(strings.TrimPrefix(msg, ","))
	return kmsgXID{pci: pci, code: code, message: msg}, true
}

// parsePCI reads "PCI:0000:3b:00", "0000:3b:00.0" or "3b:00" (domain 0).
func parsePCI(s string) (pciAddr, bool) {
	s = strings.TrimPrefix(s, "PCI:")
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		s = s[:dot]
	}
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return pciAddr{}, false
	}
	var v [3]uint64
	for i, bits := range []int{32, 8, 5} {
		n, err := strconv.ParseUint(parts[i], 16, bits)
		if err != nil {
			return pciAddr{}, false
		}
		v[i] = n
	}
	return pciAddr{domain: uint32(v[0]), bus: uint32(v[1]), device: uint32(v[2])}, true
}

// formatPCI writes a PCI address the way NVML writes bus ids.
func formatPCI(p pciAddr) string {
	return fmt.Sprintf("%08X:%02X:%02X.0", p.domain, p.bus, p.device)
}

// maxKmsgLine bounds the memory a line can take; /dev/kmsg records are at most about 8 KiB,
// so only a plain file's overlong line is cut (the XID marker is near the start).
const maxKmsgLine = 64 << 10

// kmsgReader follows the kernel log from its end: /dev/kmsg (one record per read; the read
// blocks until the next record and Close wakes it) or a plain file that something appends to
// (polled at EOF, every poll of clock).
type kmsgReader struct {
	file   *os.File
	clock  clock.Clock
	poll   time.Duration
	logger *zap.Logger
	onLine func(string)
}

// openKmsg opens the kernel log and moves to its end: XIDs logged before the collector started
// are not counted again at every restart.
func openKmsg(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (k *kmsgReader) run(stop <-chan struct{}) {
	r := bufio.NewReaderSize(k.file, 16<<10)
	var partial strings.Builder
	for {
		chunk, err := r.ReadString('\n')
		if partial.Len()+len(chunk) <= maxKmsgLine {
			partial.WriteString(chunk)
		}
		switch {
		case err == nil:
			k.onLine(partial.String())
			partial.Reset()
		case errors.Is(err, io.EOF):
			if !clock.Sleep(k.clock, k.poll, stop) {
				return
			}
		case errors.Is(err, syscall.EPIPE):
			// /dev/kmsg overwrote records before they were read; reading goes on from the next.
			partial.Reset()
		case errors.Is(err, os.ErrClosed):
			return
		default:
			k.logger.Warn("Reading the kernel log failed; XIDs now come from NVML events only", zap.String("path", k.file.Name()), zap.Error(err))
			return
		}
	}
}
