// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostTextFiles are the host files whose text a collection parses (through procfs or our own
// code), by fixture host.
var hostTextFiles = []struct{ host, file string }{
	{"v1-systemd-containerd", "proc/stat"},
	{"v1-systemd-containerd", "proc/meminfo"},
	{"v1-systemd-containerd", "proc/net/dev"},
	{"v1-systemd-containerd", "proc/diskstats"},
	{"v1-systemd-containerd", "proc/loadavg"},
	{"v1-systemd-containerd", "proc/1/mountinfo"},
	{"v1-systemd-containerd", "proc/2001/stat"},
	{"v1-systemd-containerd", "proc/2001/environ"},
	{"v1-systemd-containerd", "proc/2001/cmdline"},
	{"v1-systemd-containerd", "proc/2001/net/dev"},
	{"v1-systemd-containerd", v1ContainerDir("memory") + "/memory.stat"},
	{"v1-systemd-containerd", v1ContainerDir("memory") + "/memory.usage_in_bytes"},
	{"v1-systemd-containerd", v1ContainerDir("memory") + "/memory.limit_in_bytes"},
	{"v1-systemd-containerd", v1ContainerDir("memory") + "/cgroup.procs"},
	{"v1-systemd-containerd", v1ContainerDir("cpu,cpuacct") + "/cpuacct.usage"},
	{"v1-systemd-containerd", v1ContainerDir("blkio") + "/blkio.throttle.io_service_bytes"},
	{"v2-systemd-crio", v2ContainerDir + "/cpu.stat"},
	{"v2-systemd-crio", v2ContainerDir + "/memory.stat"},
	{"v2-systemd-crio", v2ContainerDir + "/memory.current"},
	{"v2-systemd-crio", v2ContainerDir + "/memory.max"},
	{"v2-systemd-crio", v2ContainerDir + "/io.stat"},
	{"v2-systemd-crio", v2ContainerDir + "/cgroup.procs"},
	{"v2-systemd-crio", "proc/3001/net/dev"},
	// An HCA port's files, which procfs's sysfs parsers read.
	{"v1-systemd-containerd", ibPort + "state"},
	{"v1-systemd-containerd", ibPort + "phys_state"},
	{"v1-systemd-containerd", ibPort + "rate"},
	{"v1-systemd-containerd", ibPort + "link_layer"},
	{"v1-systemd-containerd", ibPort + "counters/port_rcv_data"},
	{"v2-systemd-crio", "sys/class/infiniband/mlx5_1/ports/1/hw_counters/np_cnp_sent"},
}

func v1ContainerDir(controller string) string {
	return "sys/fs/cgroup/" + controller + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod00000001_0000_4000_8000_000000000001.slice/cri-containerd-" +
		"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b.scope"
}

const v2ContainerDir = "sys/fs/cgroup/kubepods.slice/kubepods-pod00000015_0000_4000_8000_000000000015.slice/crio-" +
	"1515151515151515151515151515151515151515151515151515151515151515.scope"

// FuzzHostFiles replaces one host file with arbitrary text and collects: nothing may panic, and
// a failure must stay partial (the rest of the node is still reported).
func FuzzHostFiles(f *testing.F) {
	roots := map[string]string{}
	for _, h := range hostTextFiles {
		if roots[h.host] == "" {
			roots[h.host] = copyHost(f, h.host)
		}
	}
	for i, h := range hostTextFiles {
		orig, err := os.ReadFile(filepath.Join(roots[h.host], h.file))
		require.NoError(f, err)
		f.Add(uint8(i), orig)
		f.Add(uint8(i), orig[:len(orig)/2])
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		h := hostTextFiles[int(which)%len(hostTextFiles)]
		path := filepath.Join(roots[h.host], h.file)
		orig, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, content, 0o600))
		defer func() { require.NoError(t, os.WriteFile(path, orig, 0o600)) }()

		s := newStartedScraper(t, testConfig(roots[h.host]))
		points := pointsByName(scrapeOnce(t, s))
		require.NotEmpty(t, points["collector_iteration_count_total"])
		require.NotEmpty(t, points["node_uname_info"], "a file unrelated to uname must not cost it")
	})
}
