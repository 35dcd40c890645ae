// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"

import (
	"io"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// BootLog is the simulated driver's kernel log since boot, as /dev/kmsg keeps it for a reader
// that opens it later: the "NVRM: Xid" line of every xid fault due by now, in the order they
// happened, whether or not its NVML event was delivered.
func (s *Server) BootLog() io.Reader {
	t := s.elapsed()
	s.mu.Lock()
	// events are in time order already; a recovery action's are no kernel log line.
	due := slices.DeleteFunc(slices.Clone(s.events), func(x *pendingEvent) bool {
		return x.eventType != nvml.EventTypeXidCriticalError || x.at > t
	})
	s.mu.Unlock()
	var log strings.Builder
	for _, x := range due {
		log.WriteString(x.device.xidLine(x.fault.XID))
	}
	return strings.NewReader(log.String())
}
