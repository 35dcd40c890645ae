// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"path/filepath"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// scrapeFilesystems reports size and available space of the host's mounts (pid 1's mount
// namespace), statfs'd through root_path, with node_exporter's labels, exclusions and de-duplication.
func (s *taskScraper) scrapeFilesystems(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	init, err := s.proc.Proc(1)
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceMountinfo, err)
		return
	}
	mounts, err := init.MountInfo()
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceMountinfo, err)
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
		path := filepath.Join(s.cfg.RootPath, m.MountPoint)
		buf, err := deadline.CallKeyed(s.statfsCalls, path, func() (unix.Statfs_t, error) {
			var buf unix.Statfs_t
			err := unix.Statfs(path, &buf)
			return buf, err
		})
		if err != nil {
			// A vanished or inaccessible mount is common (autofs, revoked NFS): count it, go on.
			s.readFailed(metadata.AttributeSourceStatfs, m.MountPoint, err)
			continue
		}
		size := float64(buf.Blocks) * float64(buf.Bsize)
		avail := float64(buf.Bavail) * float64(buf.Bsize)
		s.mb.RecordNodeFilesystemSizeBytesDataPoint(now, size, l.device, l.fstype, l.mountpoint)
		s.mb.RecordNodeFilesystemAvailBytesDataPoint(now, avail, l.device, l.fstype, l.mountpoint)
	}
}
