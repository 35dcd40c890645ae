// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"cmp"
	"io"
	"slices"
	"strings"
)

// BootLog is the simulated driver's kernel log since boot, as /dev/kmsg keeps it for a reader
// that opens it later: the "NVRM: Xid" line of every xid fault due by now, in the order they
// happened, whether or not its NVML event was delivered.
func (s *Server) BootLog() io.Reader {
	t := s.elapsed()
	s.mu.Lock()
	due := slices.DeleteFunc(slices.Clone(s.xids), func(x *pendingXID) bool { return x.fault.At > t })
	s.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *pendingXID) int { return cmp.Compare(a.fault.At, b.fault.At) })
	var log strings.Builder
	for _, x := range due {
		log.WriteString(x.device.xidLine(x.fault.XID))
	}
	return strings.NewReader(log.String())
}
