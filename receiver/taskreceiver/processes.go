// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// cmdlineTimeout bounds one read of a process's command line, which the kernel serves from the
// process's memory.
const cmdlineTimeout = time.Second

// scrapeProcesses reports processes in state D by command (zombie_process_count, OpenPAI's
// name for them) and the resident memory of large processes (process_mem_usage_byte). The pids
// are listed with the scraper's reused reader (procfs's AllProcs allocates a name and a Proc each).
func (s *taskScraper) scrapeProcesses(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	s.allPIDs = s.allPIDs[:0]
	err := s.procFiles.Subdirs(func(name []byte) error {
		if pid, err := strconv.Atoi(string(name)); err == nil && pid > 0 {
			s.allPIDs = append(s.allPIDs, pid)
		}
		return nil
	}, s.procRoot)
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceProc, err)
		return
	}
	clear(s.uninterruptible)
	for _, pid := range s.allPIDs {
		s.scrapeProcess(now, pid)
	}
	for _, c := range slices.Sorted(maps.Keys(s.uninterruptible)) {
		s.mb.RecordZombieProcessCountDataPoint(now, s.uninterruptible[c], c)
	}
}

// scrapeProcess counts a process in state D under its command, and records its resident memory
// when it is large.
func (s *taskScraper) scrapeProcess(now pcommon.Timestamp, pidNumber int) {
	pid := strconv.Itoa(pidNumber)
	b, err := s.procFiles.ReadFile(s.procRoot, pid, "stat")
	var stat processStat
	if err == nil {
		stat, err = parseProcessStat(b)
	}
	if err != nil {
		// Usually the process exited between the listing and the read.
		s.readFailed(metadata.AttributeSourceProcStat, pid, err)
		return
	}
	inD := stat.state == 'D'
	rss := stat.rssPages * int64(pageSize)
	large := s.cfg.ProcessMemThreshold > 0 && rss > s.cfg.ProcessMemThreshold
	if !inD && !large {
		return
	}
	comm := string(stat.comm)
	// A process in state D can hold the lock its command line is read under: bound the read.
	// A process gone by now, or stuck, still has its stat line: keep it with its comm.
	args, _ := deadline.CallKeyed(s.cmdlineCalls, pid, func() ([]string, error) {
		p, err := s.proc.Proc(pidNumber)
		if err != nil {
			return nil, err
		}
		return p.CmdLine()
	})
	cmd := commandName(args, comm)
	if inD {
		command := cmd
		if strings.Contains(strings.Join(args, " "), "nvidia-smi") {
			// OpenPAI's alert rule matches this one value.
			command = "nvidia-smi"
		}
		s.uninterruptible[command]++
	}
	if large {
		s.mb.RecordProcessMemUsageByteDataPoint(now, rss, pid, cmd)
	}
}

// commandName is the first token of the command line, as ps shows it; a kernel thread, which
// has none, is shown as ps does: its name in brackets.
func commandName(args []string, comm string) string {
	if len(args) > 0 {
		if fields := strings.Fields(args[0]); len(fields) > 0 {
			return fields[0]
		}
	}
	return "[" + comm + "]"
}
