// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command mkfixtures rewrites the host trees under testdata/hosts, one per cgroup layout:
//
//	go run ./internal/mkfixtures testdata/hosts   (from receiver/taskreceiver)
//
// Review the diff of the trees as you would review code: the tests' expected output follows it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

const gib = 1 << 30

// id makes a deterministic 64-hex container id; uid a pod UID.
func id(n int) string  { return strings.Repeat(fmt.Sprintf("%02x", n), 32) }
func uid(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n) }

func paiEnv(user, job, role, index string) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
		"PAI_USER_NAME=" + user,
		"PAI_JOB_NAME=" + user + "~" + job,
		"PAI_CURRENT_TASK_ROLE_NAME=" + role,
		"PAI_TASK_INDEX=" + index,
		"FC_FRAMEWORK_ATTEMPT_INSTANCE_UID=0_" + uid(42),
		"PAI_VIRTUAL_CLUSTER=default",
	}
}

// hostProcesses are outside any container: what zombie_process_count and process_mem_usage_byte see.
var hostProcesses = []hostfixture.Process{
	{PID: 300, Comm: "nvidia-smi", Cmdline: []string{"/usr/bin/nvidia-smi", "-q", "-x"}, State: "D", RSSPages: 2000},
	{PID: 301, Comm: "nvidia-smi", Cmdline: []string{"nvidia-smi"}, State: "D", RSSPages: 2000},
	{PID: 302, Comm: "jbd2/vda1-8", State: "D"},
	{PID: 303, Comm: "python3", Cmdline: []string{"/usr/bin/python3", "train.py"}, State: "S", RSSPages: 600 << 8}, // 600 MiB
	{PID: 304, Comm: "sshd", Cmdline: []string{"sshd: /usr/sbin/sshd -D"}, State: "S", RSSPages: 2000},
}

// ndrNode is four NDR InfiniBand ports of a GPU node's compute fabric: two healthy, one that
// trained at half its width (2X, 200 Gb/s) and has symbol errors, one down (its cable pulled,
// the PHY polling) after flapping.
var ndrNode = []hostfixture.HCA{
	hostfixture.ConnectX7(0, hostfixture.HCAPort{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand", Counters: hostfixture.IBCounters(0, 0, 0), HwCounters: hostfixture.HwCounters(0, false)}),
	hostfixture.ConnectX7(1, hostfixture.HCAPort{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand", Counters: hostfixture.IBCounters(1, 0, 1), HwCounters: hostfixture.HwCounters(1, false)}),
	hostfixture.ConnectX7(2, hostfixture.HCAPort{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (2X NDR)", LinkLayer: "InfiniBand", Counters: hostfixture.IBCounters(2, 1834, 0), HwCounters: hostfixture.HwCounters(2, false)}),
	hostfixture.ConnectX7(3, hostfixture.HCAPort{State: "1: DOWN", PhysState: "2: Polling", Rate: "10 Gb/sec (4X SDR)", LinkLayer: "InfiniBand", Counters: hostfixture.IBCounters(3, 12, 7), HwCounters: hostfixture.HwCounters(3, false)}),
}

// roceNode is two 400 GbE RoCE ports: counters/ and hw_counters/ with congestion control's.
var roceNode = []hostfixture.HCA{
	hostfixture.ConnectX7(0, hostfixture.HCAPort{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet", Counters: hostfixture.IBCounters(0, 0, 0), HwCounters: hostfixture.HwCounters(0, true)}),
	hostfixture.ConnectX7(1, hostfixture.HCAPort{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet", Counters: hostfixture.IBCounters(1, 0, 0), HwCounters: hostfixture.HwCounters(1, true)}),
}

var hosts = map[string]hostfixture.Host{
	// Plain docker with the cgroupfs driver, as OpenPAI's YARN-era and early k8s nodes ran.
	"v1-cgroupfs-docker": {
		CgroupVersion: 1,
		Processes:     hostProcesses,
		Containers: []hostfixture.Container{{
			CgroupPath: "/docker/" + id(1),
			Processes: []hostfixture.Process{
				{PID: 1001, Comm: "python3", Cmdline: []string{"python3", "resnet.py"}, Env: paiEnv("alice", "resnet50", "worker", "0"), State: "S", RSSPages: 1000, NetNS: 4026532101, RxBytes: 5_000_000, TxBytes: 7_000_000},
				{PID: 1002, Comm: "python3", Cmdline: []string{"python3", "-c", "loader"}, Env: paiEnv("alice", "resnet50", "worker", "0"), State: "S", RSSPages: 1000, NetNS: 4026532101, RxBytes: 5_000_000, TxBytes: 7_000_000},
			},
			CPUUsec: 3_600_000_000, MemUsage: 6 * gib, MemLimit: 16 * gib, InactiveFile: 1 * gib, ReadBytes: 1_048_576, WriteBytes: 2_097_152,
		}, {
			// Not a job: a container someone started by hand.
			CgroupPath: "/docker/" + id(2),
			Processes:  []hostfixture.Process{{PID: 1101, Comm: "redis-server", Cmdline: []string{"redis-server"}, State: "S", RSSPages: 500, NetNS: 4026532102}},
			CPUUsec:    1_000_000, MemUsage: gib / 4,
		}, {
			// A job on the host network, with FC_TASK_INDEX instead of PAI_TASK_INDEX; its first
			// pid has exited since the cgroup listed it.
			CgroupPath: "/docker/" + id(3),
			ExitedPIDs: []int{1200},
			Processes: []hostfixture.Process{
				{PID: 1201, Comm: "mpirun", Cmdline: []string{"mpirun", "-np", "8"}, Env: []string{"PAI_USER_NAME=bob", "PAI_JOB_NAME=bob~bert", "PAI_CURRENT_TASK_ROLE_NAME=master", "FC_TASK_INDEX=1"}, State: "S", RSSPages: 1000},
			},
			CPUUsec: 120_000_000, MemUsage: 2 * gib, InactiveFile: gib / 2, ReadBytes: 4096, WriteBytes: 8192,
		}},
	},
	// Kubernetes with containerd and the systemd driver on cgroup v1: burstable and best-effort
	// pods, each with its sandbox (ids sorting after and before the app's), and a platform
	// service; an NDR InfiniBand node.
	"v1-systemd-containerd": {
		CgroupVersion: 1,
		Processes:     hostProcesses,
		HCAs:          ndrNode,
		Pods: []hostfixture.Pod{{
			Sandbox: &hostfixture.Sandbox{ID: id(12), PID: 2002},
			Containers: []hostfixture.Container{{
				CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid(1), "-", "_") + ".slice/cri-containerd-" + id(11) + ".scope",
				Pod:        &hostfixture.PodLogs{Namespace: "default", Name: "llama-ft-trainer-3", Container: "trainer"},
				Processes:  []hostfixture.Process{{PID: 2001, Comm: "torchrun", Cmdline: []string{"torchrun", "train.py"}, Env: paiEnv("carol", "llama-ft", "trainer", "3"), State: "S", RSSPages: 1000, NetNS: 4026532201, RxBytes: 1_000_000_000, TxBytes: 2_000_000_000}},
				CPUUsec:    7_200_000_000, MemUsage: 30 * gib, MemLimit: 64 * gib, InactiveFile: 2 * gib, ReadBytes: 10_485_760, WriteBytes: 0,
			}},
		}, {
			// A plain Kubernetes job: no PAI environment, still a task, named after its pod; its
			// container's name comes from the pod's only log directory (no /var/log/containers
			// link), which its sandbox must not take.
			Sandbox: &hostfixture.Sandbox{ID: id(10), PID: 2102},
			Containers: []hostfixture.Container{{
				CgroupPath: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid(2), "-", "_") + ".slice/cri-containerd-" + id(13) + ".scope",
				Pod:        &hostfixture.PodLogs{Namespace: "batch", Name: "nightly-etl-7f9c", Container: "etl", NoLink: true},
				Processes:  []hostfixture.Process{{PID: 2101, Comm: "bash", Cmdline: []string{"/bin/bash", "run.sh"}, Env: []string{"HOME=/root"}, State: "S", RSSPages: 300, NetNS: 4026532202, RxBytes: 10_000, TxBytes: 20_000}},
				CPUUsec:    5_000_000, MemUsage: gib / 8,
			}},
		}, {
			// A platform service: its pod runs in a namespace named in service_namespaces, and is
			// named by its container.
			Sandbox: &hostfixture.Sandbox{ID: id(15), PID: 2202},
			Containers: []hostfixture.Container{{
				CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid(3), "-", "_") + ".slice/cri-containerd-" + id(14) + ".scope",
				Pod:        &hostfixture.PodLogs{Namespace: "pai", Name: "prometheus-0", Container: "prometheus-server"},
				Processes:  []hostfixture.Process{{PID: 2201, Comm: "prometheus", Cmdline: []string{"/bin/prometheus"}, State: "S", RSSPages: 5000, NetNS: 4026532203, RxBytes: 300_000, TxBytes: 400_000, ServiceAccountNamespace: "pai"}},
				CPUUsec:    900_000_000, MemUsage: 3 * gib, MemLimit: 4 * gib, InactiveFile: gib, ReadBytes: 512, WriteBytes: 1024,
			}},
		}},
	},
	// Kubernetes with cri-o and the systemd driver on cgroup v2: a guaranteed pod without a
	// sandbox (cri-o's default) and with cri-o's conmon scope beside it (not a container), and a
	// host-network pod without a memory limit that shares its PID namespace (so cri-o gave it a
	// sandbox, whose id sorts before the app's) and whose logs the kubelet has not written yet
	// (no names: the task keeps its environment's labels). A RoCE node.
	"v2-systemd-crio": {
		CgroupVersion: 2,
		Processes:     hostProcesses,
		HCAs:          roceNode,
		Pods: []hostfixture.Pod{{
			Containers: []hostfixture.Container{{
				CgroupPath: "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid(21), "-", "_") + ".slice/crio-" + id(21) + ".scope",
				Pod:        &hostfixture.PodLogs{Namespace: "serving", Name: "infer-0", Container: "server"},
				Processes:  []hostfixture.Process{{PID: 3001, Comm: "python", Cmdline: []string{"python", "serve.py"}, Env: paiEnv("dave", "infer", "server", "0"), State: "S", RSSPages: 1000, NetNS: 4026532301, RxBytes: 123_456, TxBytes: 654_321}},
				CPUUsec:    60_000_000, MemUsage: 8 * gib, MemLimit: 8 * gib, InactiveFile: gib / 2, ReadBytes: 100, WriteBytes: 200,
			}},
		}, {
			Sandbox: &hostfixture.Sandbox{ID: id(20), PID: 3102},
			Containers: []hostfixture.Container{{
				CgroupPath: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid(22), "-", "_") + ".slice/crio-" + id(22) + ".scope",
				Processes:  []hostfixture.Process{{PID: 3101, Comm: "horovodrun", Cmdline: []string{"horovodrun"}, Env: paiEnv("erin", "hvd", "worker", "7"), State: "S", RSSPages: 1000}},
				CPUUsec:    30_000_000, MemUsage: gib, InactiveFile: 0, ReadBytes: 0, WriteBytes: 4096,
			}},
		}},
		Containers: []hostfixture.Container{{
			CgroupPath: "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid(21), "-", "_") + ".slice/crio-conmon-" + id(21) + ".scope",
			Processes:  []hostfixture.Process{{PID: 3002, Comm: "conmon", Cmdline: []string{"/usr/bin/conmon"}, State: "S", RSSPages: 100}},
		}},
	},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkfixtures DIR")
		os.Exit(2)
	}
	for name := range hosts {
		h := hosts[name]
		dir := filepath.Join(os.Args[1], name)
		if err := os.RemoveAll(dir); err != nil { //nolint:gosec // G703: it rewrites the fixtures in the directory on its command line, as it is meant to
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := hostfixture.Write(dir, h); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
