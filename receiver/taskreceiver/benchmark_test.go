// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"fmt"
	"path/filepath"
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
