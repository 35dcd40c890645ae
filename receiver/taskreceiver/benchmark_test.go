// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

func busyHost(tb testing.TB, version, n int) string {
	root := filepath.Join(tb.TempDir(), "host")
	require.NoError(tb, hostfixture.Write(root, hostfixture.Busy(version, n)))
	return root
}

// BenchmarkScrape500Containers measures one collection of a node running 500 containers
// (1,000 processes), after the first collection has identified them.
func BenchmarkScrape500Containers(b *testing.B) {
	for _, version := range []int{1, 2} {
		b.Run(fmt.Sprintf("cgroup-v%d", version), func(b *testing.B) {
			s := newStartedScraper(b, testConfig(busyHost(b, version, 500)))
			md := scrapeOnce(b, s)
			require.Equal(b, 501, md.ResourceMetrics().Len(), "500 tasks and the node")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				advance(s, s.cfg.CollectionInterval) // a steady collection computes rates
				_, _ = s.scrape(b.Context())
			}
		})
	}
}

// BenchmarkReadFiles500Containers is the raw cost of reading what one steady collection of the
// same node reads, with plain os.ReadFile, os.Readlink and os.ReadDir: the baseline for
// BenchmarkScrape500Containers. The list is the receiver's, file by file (readSet); statfs of the
// mounts, also made every collection, is left out.
func BenchmarkReadFiles500Containers(b *testing.B) {
	for _, version := range []int{1, 2} {
		b.Run(fmt.Sprintf("cgroup-v%d", version), func(b *testing.B) {
			h := hostfixture.Busy(version, 500)
			root := filepath.Join(b.TempDir(), "host")
			require.NoError(b, hostfixture.Write(root, h))
			set := readSet(b, root, h)
			for _, f := range set.files {
				_, err := os.ReadFile(f)
				require.NoError(b, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, d := range set.dirs {
					_, _ = os.ReadDir(d)
				}
				for _, f := range set.files {
					_, _ = os.ReadFile(f)
				}
				for _, l := range set.links {
					_, _ = os.Readlink(l)
				}
			}
		})
	}
}

type hostReadSet struct{ files, links, dirs []string }

// readSet lists what a steady collection of host h (written at root) reads: the node's files,
// every process's stat, and per container its cgroup files, one process's network namespace
// link and net/dev; the directories listed are /proc and the cgroup tree above the containers.
// Environment, command lines and the pod log layout, read when a container is first met, are not in it.
func readSet(tb testing.TB, root string, h hostfixture.Host) hostReadSet {
	proc := filepath.Join(root, "proc")
	var set hostReadSet
	for _, f := range []string{
		"stat", "meminfo", "net/dev", "diskstats", "loadavg", "1/mountinfo",
		"sys/kernel/ostype", "sys/kernel/osrelease", "sys/kernel/version", "sys/kernel/hostname", "sys/kernel/domainname", "sys/kernel/arch",
	} {
		set.files = append(set.files, filepath.Join(proc, f))
	}
	set.links = append(set.links, filepath.Join(proc, "1/ns/net"))
	set.dirs = append(set.dirs, proc)
	set.files = append(set.files, filepath.Join(proc, "1/stat"))
	for i := range h.Processes {
		p := &h.Processes[i]
		set.files = append(set.files, filepath.Join(proc, strconv.Itoa(p.PID), "stat"))
	}

	cgroupRoot := filepath.Join(root, "sys/fs/cgroup")
	controllerFiles := map[string][]string{"": {"cgroup.procs", "cpu.stat", "memory.current", "memory.max", "memory.stat", "io.stat"}}
	walked := cgroupRoot
	if h.CgroupVersion == 1 {
		controllerFiles = map[string][]string{
			"memory":  {"cgroup.procs", "memory.usage_in_bytes", "memory.limit_in_bytes", "memory.stat"},
			"cpuacct": {"cpuacct.usage"},
			"blkio":   {"blkio.throttle.io_service_bytes"},
		}
		walked = filepath.Join(cgroupRoot, "memory")
	}
	listed := map[string]bool{}
	containers, err := h.AllContainers()
	require.NoError(tb, err)
	for _, c := range containers {
		for dir := path.Dir(c.CgroupPath); !listed[dir]; dir = path.Dir(dir) {
			listed[dir] = true
			set.dirs = append(set.dirs, filepath.Join(walked, dir))
		}
		if c.Processes[0].Comm == "pause" {
			// A pod's sandbox: its processes are listed, nothing else is read.
			set.files = append(set.files, filepath.Join(walked, c.CgroupPath, "cgroup.procs"), filepath.Join(proc, strconv.Itoa(c.Processes[0].PID), "stat"))
			continue
		}
		for controller, files := range controllerFiles {
			for _, f := range files {
				set.files = append(set.files, filepath.Join(cgroupRoot, controller, c.CgroupPath, f))
			}
		}
		pid := strconv.Itoa(c.Processes[0].PID)
		set.links = append(set.links, filepath.Join(proc, pid, "ns/net"))
		set.files = append(set.files, filepath.Join(proc, pid, "net/dev"))
		for i := range c.Processes {
			p := &c.Processes[i]
			set.files = append(set.files, filepath.Join(proc, strconv.Itoa(p.PID), "stat"))
		}
	}
	return set
}

// BenchmarkScrapeInfiniBand measures the InfiniBand part of one collection on a node with eight
// NDR ports (a DGX H100's compute fabric), emitted: what the fabric adds to a collection.
func BenchmarkScrapeInfiniBand(b *testing.B) {
	h := hostfixture.Host{CgroupVersion: 2}
	for n := range uint64(8) {
		h.HCAs = append(h.HCAs, hostfixture.ConnectX7(n, hostfixture.HCAPort{
			State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand",
			Counters: hostfixture.IBCounters(n, 0, 0), HwCounters: hostfixture.HwCounters(n, false),
		}))
	}
	root := filepath.Join(b.TempDir(), "host")
	require.NoError(b, hostfixture.Write(root, h))
	s := newStartedScraper(b, testConfig(root))
	var errs scrapererror.ScrapeErrors
	s.scrapeInfiniBand(pcommon.NewTimestampFromTime(time.Now()), &errs)
	require.NoError(b, errs.Combine())
	require.Equal(b, 8*(5+22+20), s.mb.Emit().DataPointCount(), "per one-port HCA: info, state, physical state, rate, link layer; 22 counters; 20 hw_counters")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.scrapeInfiniBand(pcommon.NewTimestampFromTime(time.Now()), &errs)
		s.mb.Emit()
	}
}
