// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The node's own files, in the kernel's formats (taken from a 2-CPU Linux 6.x machine).

const mountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
28 27 0:25 / /run rw,nosuid,nodev - tmpfs tmpfs rw,size=2468004k,mode=755
29 27 254:0 /var/lib/docker /var/lib/docker/overlay2/abc/merged rw,relatime - overlay overlay rw
30 27 0:40 / /mnt/gone rw,relatime - nfs4 server:/export rw
`

func (w *writer) node() {
	w.file("proc/stat", `cpu  12156 5 3604 70433 218 1 73 24 0 0
cpu0 5837 2 1738 35572 37 0 20 10 0 0
cpu1 6319 3 1866 34861 181 1 53 14 0 0
intr 1930203 0 9 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 3514232
btime 1764506388
processes 7610
procs_running 2
procs_blocked 1
softirq 1188574 0 225367 3 21035 0 0 5416 459201 0 477552
`)
	w.file("proc/meminfo", `MemTotal:       24668920 kB
MemFree:        18123456 kB
MemAvailable:   22012344 kB
Buffers:          201328 kB
Cached:          3401212 kB
SwapCached:            0 kB
Active:          2330488 kB
Inactive:        3087600 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Dirty:               252 kB
`)
	w.file("proc/net/dev", `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 8812345   40212    0    0    0     0          0         0  8812345   40212    0    0    0     0       0          0
  eth0: 987654321  712345    0    0    0     0          0         0 123456789  402311    0    0    0     0       0          0
`)
	w.file("proc/diskstats", `   7       0 loop0 12 0 24 1 0 0 0 0 0 4 1 0 0 0 0 0 0
 254       0 vda 48213 1012 3311234 21001 91234 33212 9123456 88123 0 61234 109124 0 0 0 0 812 120
 254       1 vda1 48100 1012 3310000 21000 91200 33200 9123000 88100 0 61200 109100 0 0 0 0 0 0
 259       0 nvme0n1 1200 0 96000 300 800 0 64000 200 0 500 500 0 0 0 0 0 0
`)
	w.file("proc/partitions", `major minor  #blocks  name

 254        0  268435456 vda
 254        1  268434432 vda1
 259        0  976762584 nvme0n1
`)
	w.file("proc/loadavg", "1.22 0.60 0.28 2/77 7505\n")
	w.file("proc/sys/kernel/ostype", "Linux\n")
	w.file("proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
	w.file("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n")
	w.file("proc/sys/kernel/hostname", "gpu-node-07\n")
	w.file("proc/sys/kernel/domainname", "(none)\n")
	w.file("proc/sys/kernel/arch", "x86_64\n")
	w.dir("sys/block")
}

// nvidia writes the driver's /proc files (the lines a 550 driver writes, in its spacing).
func (w *writer) nvidia(gpus []NvidiaGPU) {
	if len(gpus) == 0 {
		return
	}
	var minors strings.Builder
	minors.WriteString("config 1\nmonitor 2\n")
	for _, g := range gpus {
		w.file(filepath.Join("proc/driver/nvidia/gpus", g.BusID, "information"), fmt.Sprintf(
			"Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n",
			g.UUID, g.BusID, g.Minor,
		))
		for gi := range migGPUInstances {
			fmt.Fprintf(&minors, "gpu%d/gi%d/access %d\n", g.Minor, gi, MIGCapMinor(g.Minor, gi, -1))
			for ci := range migComputeInstances {
				fmt.Fprintf(&minors, "gpu%d/gi%d/ci%d/access %d\n", g.Minor, gi, ci, MIGCapMinor(g.Minor, gi, ci))
			}
		}
	}
	w.file("proc/driver/nvidia-caps/mig-minors", minors.String())
}
