// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

// busyHost lays out a node with n job containers of two processes each, in burstable pods
// under the systemd driver.
func busyHost(tb testing.TB, version, n int) string {
	h := hostfixture.Host{CgroupVersion: version}
	for i := 0; i < n; i++ {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		id := fmt.Sprintf("%064x", i+1)
		env := []string{"PAI_USER_NAME=user", fmt.Sprintf("PAI_JOB_NAME=user~job%d", i), "PAI_CURRENT_TASK_ROLE_NAME=worker", "PAI_TASK_INDEX=0"}
		pid := 10000 + 2*i
		h.Containers = append(h.Containers, hostfixture.Container{
			CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope",
			Processes: []hostfixture.Process{
				{PID: pid, Comm: "python3", Cmdline: []string{"python3", "train.py"}, Env: env, State: "S", RSSPages: 1000, NetNS: uint32(4026540000 + i), RxBytes: 1000, TxBytes: 2000},
				{PID: pid + 1, Comm: "python3", Cmdline: []string{"python3", "loader.py"}, Env: env, State: "S", RSSPages: 1000, NetNS: uint32(4026540000 + i)},
			},
			CPUUsec: 1_000_000, MemUsage: 1 << 30, MemLimit: 4 << 30, InactiveFile: 1 << 20, ReadBytes: 4096, WriteBytes: 8192,
		})
	}
	root := filepath.Join(tb.TempDir(), "host")
	require.NoError(tb, hostfixture.Write(root, h))
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
