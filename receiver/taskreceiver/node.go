// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

var errNoData = errors.New("file has no data lines")

// scrapeNode records the node_* metrics with node_exporter's names and semantics. Each source
// stands alone: one unreadable file costs only its own metrics.
func (s *taskScraper) scrapeNode(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	for _, src := range []struct {
		source metadata.AttributeSource
		read   func(pcommon.Timestamp, *scrapererror.ScrapeErrors)
	}{
		{metadata.AttributeSourceUname, s.scrapeUname},
		{metadata.AttributeSourceStat, s.scrapeCPU},
		{metadata.AttributeSourceMeminfo, s.scrapeMemory},
		{metadata.AttributeSourceNetDev, s.scrapeNetDev},
		{metadata.AttributeSourceDiskstats, s.scrapeDiskstats},
		{metadata.AttributeSourceMountinfo, s.scrapeFilesystems},
		{metadata.AttributeSourceLoadavg, s.scrapeLoad},
		{metadata.AttributeSourceInfiniband, s.scrapeInfiniBand},
	} {
		func() {
			defer s.recoverRead(src.source, "", errs)
			src.read(now, errs)
		}()
	}
}

func (s *taskScraper) scrapeLoad(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	load, err := s.proc.LoadAvg()
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceLoadavg, err)
		return
	}
	s.mb.RecordNodeLoad1DataPoint(now, load.Load1)
}

// scrapeUname reads uname(2)'s fields from /proc/sys/kernel, so that a fixture tree (and the
// host's tree under root_path) decides them; the architecture falls back to uname(2) on kernels
// older than 6.1, which lack kernel/arch, and is the same kernel's anyway.
func (s *taskScraper) scrapeUname(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	dir := filepath.Join(s.cfg.RootPath, "proc", "sys", "kernel")
	var fields [5]string
	for i, name := range []string{"ostype", "osrelease", "version", "hostname", "domainname"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			s.nodeReadFailed(errs, metadata.AttributeSourceUname, err)
			return
		}
		fields[i] = strings.TrimSpace(string(b))
	}
	machine := ""
	if b, err := os.ReadFile(filepath.Join(dir, "arch")); err == nil {
		machine = strings.TrimSpace(string(b))
	} else {
		var u unix.Utsname
		if err := unix.Uname(&u); err == nil {
			machine = unix.ByteSliceToString(u.Machine[:])
		}
	}
	s.mb.RecordNodeUnameInfoDataPoint(now, 1, fields[0], fields[1], fields[2], machine, fields[3], fields[4])
}

func (s *taskScraper) scrapeCPU(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	stat, err := s.proc.Stat()
	if err == nil && len(stat.CPU) == 0 {
		err = errNoData // an empty or cut file parses without error
	}
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceStat, err)
		return
	}
	for n, c := range stat.CPU {
		cpu := strconv.FormatInt(n, 10)
		for _, m := range []struct {
			mode  metadata.AttributeMode
			value float64
		}{
			{metadata.AttributeModeUser, c.User},
			{metadata.AttributeModeNice, c.Nice},
			{metadata.AttributeModeSystem, c.System},
			{metadata.AttributeModeIdle, c.Idle},
			{metadata.AttributeModeIowait, c.Iowait},
			{metadata.AttributeModeIrq, c.IRQ},
			{metadata.AttributeModeSoftirq, c.SoftIRQ},
			{metadata.AttributeModeSteal, c.Steal},
		} {
			s.mb.RecordNodeCPUSecondsTotalDataPoint(now, m.value, cpu, m.mode)
		}
	}
}

func (s *taskScraper) scrapeMemory(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	mi, err := s.proc.Meminfo()
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceMeminfo, err)
		return
	}
	if mi.MemTotalBytes != nil {
		s.memTotal = *mi.MemTotalBytes
	}
	for _, m := range []struct {
		value  *uint64
		record func(pcommon.Timestamp, float64)
	}{
		{mi.MemTotalBytes, s.mb.RecordNodeMemoryMemTotalBytesDataPoint},
		{mi.MemFreeBytes, s.mb.RecordNodeMemoryMemFreeBytesDataPoint},
		{mi.MemAvailableBytes, s.mb.RecordNodeMemoryMemAvailableBytesDataPoint},
		{mi.BuffersBytes, s.mb.RecordNodeMemoryBuffersBytesDataPoint},
		{mi.CachedBytes, s.mb.RecordNodeMemoryCachedBytesDataPoint},
	} {
		// A field the kernel does not have (MemAvailable before 3.14) is absent, not zero.
		if m.value != nil {
			m.record(now, float64(*m.value))
		}
	}
}

func (s *taskScraper) scrapeNetDev(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	netDev, err := s.proc.NetDev()
	if err == nil && len(netDev) == 0 {
		err = errNoData // every host has lo; none means the file was cut
	}
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceNetDev, err)
		return
	}
	for name, line := range netDev { //nolint:gocritic // rangeValCopy: a map's values are copied however they are read
		s.mb.RecordNodeNetworkReceiveBytesTotalDataPoint(now, float64(line.RxBytes), name)
		s.mb.RecordNodeNetworkTransmitBytesTotalDataPoint(now, float64(line.TxBytes), name)
	}
}

// sectorSize is the unit of /proc/diskstats whatever the device's real sector size.
const sectorSize = 512

func (s *taskScraper) scrapeDiskstats(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	disks, err := s.block.ProcDiskstats()
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceDiskstats, err)
		return
	}
	for i := range disks {
		d := &disks[i]
		if s.diskExclude.MatchString(d.DeviceName) {
			continue
		}
		s.mb.RecordNodeDiskReadBytesTotalDataPoint(now, float64(d.ReadSectors*sectorSize), d.DeviceName)
		s.mb.RecordNodeDiskWrittenBytesTotalDataPoint(now, float64(d.WriteSectors*sectorSize), d.DeviceName)
	}
}
