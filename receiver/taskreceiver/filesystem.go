// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"golang.org/x/sys/unix"
)

// scrapeFilesystems reports size and available space of the host's mounts (pid 1's mount
// namespace), statfs'd through root_path, with node_exporter's labels, exclusions and de-duplication.
func (s *taskScraper) scrapeFilesystems(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	init, err := s.proc.Proc(1)
	if err != nil {
		s.nodeReadFailed(errs, "mountinfo", err)
		return
	}
	mounts, err := init.MountInfo()
	if err != nil {
		s.nodeReadFailed(errs, "mountinfo", err)
		return
	}
	type labels struct{ device, fstype, mountpoint string }
	seen := map[labels]bool{}
	for _, m := range mounts {
		l := labels{m.Source, m.FSType, m.MountPoint}
		if seen[l] || s.mountPointsExclude.MatchString(m.MountPoint) || s.fsTypesExclude.MatchString(m.FSType) {
			continue
		}
		seen[l] = true
		buf, err := s.statfs.statfs(filepath.Join(s.cfg.RootPath, m.MountPoint))
		if err != nil {
			// A vanished or inaccessible mount is common (autofs, revoked NFS): count it, go on.
			s.readFailed("statfs")
			continue
		}
		size := float64(buf.Blocks) * float64(buf.Bsize)
		avail := float64(buf.Bavail) * float64(buf.Bsize)
		s.mb.RecordNodeFilesystemSizeBytesDataPoint(now, size, l.device, l.fstype, l.mountpoint)
		s.mb.RecordNodeFilesystemAvailBytesDataPoint(now, avail, l.device, l.fstype, l.mountpoint)
	}
}

var errStatfsHung = errors.New("statfs did not return in time")

// statfsGuard bounds statfs(2), which blocks forever on a dead NFS server. A mount whose call has
// not returned is skipped, without a new call, until that call returns.
type statfsGuard struct {
	timeout  time.Duration
	mu       sync.Mutex
	inFlight map[string]bool
}

func newStatfsGuard(timeout time.Duration) *statfsGuard {
	return &statfsGuard{timeout: timeout, inFlight: map[string]bool{}}
}

func (g *statfsGuard) statfs(path string) (unix.Statfs_t, error) {
	g.mu.Lock()
	if g.inFlight[path] {
		g.mu.Unlock()
		return unix.Statfs_t{}, errStatfsHung
	}
	g.inFlight[path] = true
	g.mu.Unlock()

	type result struct {
		buf unix.Statfs_t
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = unix.Statfs(path, &r.buf)
		g.mu.Lock()
		delete(g.inFlight, path)
		g.mu.Unlock()
		done <- r
	}()
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.buf, r.err
	case <-timer.C:
		return unix.Statfs_t{}, errStatfsHung
	}
}
