// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
				_, _ = s.scrape(b.Context())
			}
		})
	}
}

// BenchmarkReadFiles500Containers is the raw cost of reading what one collection of the same
// node reads, with plain os.ReadFile (and os.Readlink for each process's network namespace): the
// baseline for BenchmarkScrape500Containers. The files are every file of the fixture tree except
// those a collection reads only when it first meets a container or process (environ, cmdline,
// comm, cgroup, mountinfo) and node files read once at start (the kernel's names).
func BenchmarkReadFiles500Containers(b *testing.B) {
	for _, version := range []int{1, 2} {
		b.Run(fmt.Sprintf("cgroup-v%d", version), func(b *testing.B) {
			root := busyHost(b, version, 500)
			var files, links []string
			require.NoError(b, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				switch name := d.Name(); {
				case d.Type()&fs.ModeSymlink != 0:
					links = append(links, path)
				case slices.Contains([]string{"environ", "cmdline", "comm", "cgroup", "mountinfo"}, name),
					strings.Contains(path, "/proc/sys/kernel/"):
				default:
					files = append(files, path)
				}
				return nil
			}))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, f := range files {
					_, _ = os.ReadFile(f)
				}
				for _, l := range links {
					_, _ = os.Readlink(l)
				}
			}
		})
	}
}
