// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostfixture writes a fake host tree (/proc, /sys/fs/cgroup v1 or v2, /sys/class/infiniband) that the
// task receiver can read through its root_path: the node's files as a kernel writes them, plus
// containers with processes, environment, network namespace and cgroup statistics. The checked-in
// trees under receiver/taskreceiver/testdata/hosts are written by it (see receiver/taskreceiver/internal/mkfixtures), and
// benchmarks use it to lay out hundreds of containers.
package hostfixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
)

// HostNetNS is the inode of the node's network namespace in every fixture.
const HostNetNS = 4026531992

// Host describes a fake node.
type Host struct {
	// CgroupVersion is 1 (a controller directory each) or 2 (unified).
	CgroupVersion int
	// Pods are Kubernetes pods: their app containers and sandboxes.
	Pods []Pod
	// Containers are outside any pod: docker's own, a runtime's monitor such as cri-o's conmon.
	Containers []Container
	// Processes outside any container.
	Processes []Process
	// NvidiaGPUs are the NVIDIA kernel driver's GPUs: /proc/driver/nvidia/gpus/<bus id>/information
	// each, and the MIG capability minors of /proc/driver/nvidia-caps/mig-minors for them.
	NvidiaGPUs []NvidiaGPU
	// CDISpecs are Container Device Interface spec files by name, as a DRA driver writes them
	// into /var/run/cdi; /var/run is laid out as a systemd host has it, a link to /run.
	CDISpecs map[string]string
	// HCAs are the RDMA devices of /sys/class/infiniband (InfiniBand or RoCE ports).
	HCAs []HCA
}

// NvidiaGPU is a GPU as the NVIDIA kernel driver describes it.
type NvidiaGPU struct {
	// BusID names its directory under /proc/driver/nvidia/gpus, e.g. 0000:07:00.0.
	BusID string
	// Minor is its /dev/nvidia<minor>: the driver's numbering, not NVML's index (minor_number).
	Minor int
	UUID  string
}

// MIG capability minors, as the NVIDIA driver numbers them in /proc/driver/nvidia-caps/mig-minors:
// config and monitor first, then for each GPU minor 15 GPU instances of one access minor and 8
// compute instances each.
const (
	migGPUInstances     = 15
	migComputeInstances = 8
	migMinorsPerGI      = 1 + migComputeInstances
	migMinorsPerGPU     = migGPUInstances * migMinorsPerGI
)

// MIGCapMinor is the minor of /dev/nvidia-caps/nvidia-cap<minor>, the capability to use compute
// instance ci of GPU instance gi on the GPU of /dev/nvidia<gpu>; ci < 0 is the GPU instance's.
func MIGCapMinor(gpu, gi, ci int) int {
	return 3 + gpu*migMinorsPerGPU + gi*migMinorsPerGI + 1 + ci
}

// Pod is a pod's containers as the kubelet and the container runtime lay them out: the app
// containers, in the pod's cgroup, and the sandbox beside them. Lay pods out with their
// sandboxes: a node without them is no real node, and attribution once broke on it (a sandbox
// took its app container's name).
type Pod struct {
	// Sandbox is the pod's pause container; nil for a pod without one. containerd starts one
	// for every pod; cri-o only when the pod shares its PID namespace (or with drop_infra_ctr
	// off). The kubelet writes no logs for it.
	Sandbox *Sandbox
	// Containers are the pod's app containers, each with its cgroup path in the pod's cgroup.
	Containers []Container
}

// Sandbox is a pod's pause container: its cgroup is named like the app containers' with its own
// id, and its one process, pause, is in the network namespace of the pod's first container.
type Sandbox struct {
	ID  string
	PID int
}

// Process is a process's /proc entry.
type Process struct {
	PID     int
	Comm    string
	Cmdline []string
	Env     []string
	// State is the stat state letter (R, S, D, Z…).
	State string
	// RSSPages is the resident set in pages.
	RSSPages int64
	// NetNS is the network namespace inode; 0 means the node's.
	NetNS uint32
	// RxBytes and TxBytes go to the namespace's net/dev (eth0; lo carries a fixed amount).
	RxBytes, TxBytes uint64
	// ServiceAccountNamespace, if set, is written where Kubernetes mounts the pod's namespace.
	ServiceAccountNamespace string
}

// Container is a cgroup with processes in it.
type Container struct {
	// CgroupPath is relative to the hierarchy root, e.g. /kubepods/burstable/pod<uid>/<id>.
	CgroupPath string
	// Pod, if set, names the container's pod in the kubelet's log layout (the pod UID and the
	// container id are the cgroup path's).
	Pod       *PodLogs
	Processes []Process
	// ExitedPIDs are listed in cgroup.procs but have no /proc entry: they exited in between.
	ExitedPIDs []int
	CPUUsec    uint64
	MemUsage   uint64
	// MemLimit 0 means no limit ("max" in v2, the kernel's huge number in v1).
	MemLimit     uint64
	InactiveFile uint64
	ReadBytes    uint64
	WriteBytes   uint64
}

// sandbox is the sandbox's container, beside app, the pod's first app container.
func (p Pod) sandbox(app Container, appID string) Container {
	dir, leaf := path.Split(app.CgroupPath)
	var netns uint32
	if len(app.Processes) > 0 {
		netns = app.Processes[0].NetNS
	}
	return Container{
		CgroupPath: dir + strings.Replace(leaf, appID, p.Sandbox.ID, 1),
		Processes:  []Process{{PID: p.Sandbox.PID, Comm: "pause", Cmdline: []string{"/pause"}, State: "S", RSSPages: 250, NetNS: netns}},
		CPUUsec:    20_000, MemUsage: 1 << 20,
	}
}

// AllContainers are every container of the host, the pods' (sandboxes included) first.
func (h Host) AllContainers() ([]Container, error) {
	var all []Container
	for i, p := range h.Pods {
		if len(p.Containers) == 0 {
			return nil, fmt.Errorf("pods[%d]: a pod needs an app container", i)
		}
		var first cgroupfs.Container
		for j, c := range p.Containers {
			ctr, ok := cgroupfs.ParseContainer(c.CgroupPath)
			if !ok || ctr.PodUID == "" || (j > 0 && ctr.PodUID != first.PodUID) {
				return nil, fmt.Errorf("pods[%d]: %s is not a container of the pod's cgroup", i, c.CgroupPath)
			}
			if j == 0 {
				first = ctr
			}
		}
		all = append(all, p.Containers...)
		if p.Sandbox != nil {
			all = append(all, p.sandbox(p.Containers[0], first.ID))
		}
	}
	for _, c := range h.Containers {
		if ctr, ok := cgroupfs.ParseContainer(c.CgroupPath); ok && ctr.PodUID != "" {
			return nil, fmt.Errorf("container %s is a pod's: lay it out in Pods, with its pod's sandbox", c.CgroupPath)
		}
	}
	return append(all, h.Containers...), nil
}

// PodLogs is what the kubelet's log layout says of a container: /var/log/pods/<namespace>_<name>_<uid>/<container>/
// and, unless NoLink, the /var/log/containers/<name>_<namespace>_<container>-<id>.log link.
type PodLogs struct {
	Namespace, Name, Container string
	NoLink                     bool
}

// Write lays the host out under root, which must not exist yet or be empty.
func Write(root string, h Host) error {
	containers, err := h.AllContainers()
	if err != nil {
		return err
	}
	w := writer{root: root}
	w.node()
	init := Process{PID: 1, Comm: "systemd", Cmdline: []string{"/sbin/init"}, State: "S", RSSPages: 3000}
	w.process(init)
	w.file("proc/1/mountinfo", mountinfo)
	for i := range h.Processes {
		w.process(h.Processes[i])
	}
	switch h.CgroupVersion {
	case 1:
		for _, c := range []string{"memory", "cpu,cpuacct", "blkio", "pids"} {
			w.dir(filepath.Join("sys/fs/cgroup", c))
		}
		w.symlink("cpu,cpuacct", "sys/fs/cgroup/cpuacct")
		w.symlink("cpu,cpuacct", "sys/fs/cgroup/cpu")
		for _, c := range containers {
			w.containerV1(c)
		}
	case 2:
		w.file("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
		for _, c := range containers {
			w.containerV2(c)
		}
	default:
		return fmt.Errorf("cgroup version %d: want 1 or 2", h.CgroupVersion)
	}
	for _, c := range containers {
		for i := range c.Processes {
			w.process(c.Processes[i])
			w.procCgroup(c.Processes[i].PID, h.CgroupVersion, c.CgroupPath)
		}
		w.podLogs(c)
	}
	w.procCgroup(init.PID, h.CgroupVersion, "/")
	for i := range h.Processes {
		w.procCgroup(h.Processes[i].PID, h.CgroupVersion, "/")
	}
	w.nvidia(h.NvidiaGPUs)
	w.infiniband(h.HCAs)
	if len(h.CDISpecs) > 0 {
		w.symlink("/run", "var/run")
		for name, content := range h.CDISpecs {
			w.file(filepath.Join("run/cdi", name), content)
		}
	}
	return w.err
}

type writer struct {
	root string
	err  error
}

// procCgroup writes /proc/<pid>/cgroup as the kernel does: one line per v1 hierarchy, or the
// single unified line.
func (w *writer) procCgroup(pid, version int, cgroupPath string) {
	content := "0::" + cgroupPath + "\n"
	if version == 1 {
		content = fmt.Sprintf("12:memory:%[1]s\n11:cpu,cpuacct:%[1]s\n10:blkio:%[1]s\n9:pids:%[1]s\n1:name=systemd:%[1]s\n", cgroupPath)
	}
	w.file(filepath.Join("proc", strconv.Itoa(pid), "cgroup"), content)
}

func (w *writer) podLogs(c Container) {
	if c.Pod == nil {
		return
	}
	ctr, ok := cgroupfs.ParseContainer(c.CgroupPath)
	if !ok || ctr.PodUID == "" {
		w.err = fmt.Errorf("container %s: pod logs need a pod container's cgroup path", c.CgroupPath)
		return
	}
	p := c.Pod
	podDir := fmt.Sprintf("var/log/pods/%s_%s_%s", p.Namespace, p.Name, ctr.PodUID)
	w.file(filepath.Join(podDir, p.Container, "0.log"), "")
	if !p.NoLink {
		w.symlink("/"+filepath.Join(podDir, p.Container, "0.log"),
			fmt.Sprintf("var/log/containers/%s_%s_%s-%s.log", p.Name, p.Namespace, p.Container, ctr.ID))
	}
}

func (w *writer) dir(rel string) {
	if w.err == nil {
		w.err = os.MkdirAll(filepath.Join(w.root, rel), 0o755)
	}
}

func (w *writer) file(rel, content string) {
	w.dir(filepath.Dir(rel))
	if w.err == nil {
		w.err = os.WriteFile(filepath.Join(w.root, rel), []byte(content), 0o644) //nolint:gosec // G306: a host's /proc and /sys files are world-readable, and so are the checked-in fixtures
	}
}

func (w *writer) symlink(target, rel string) {
	w.dir(filepath.Dir(rel))
	if w.err == nil {
		w.err = os.Symlink(target, filepath.Join(w.root, rel))
	}
}

func (w *writer) process(p Process) {
	dir := filepath.Join("proc", strconv.Itoa(p.PID))
	// Fields 3.. of /proc/<pid>/stat as the kernel writes them; rss is field 24.
	w.file(filepath.Join(dir, "stat"), fmt.Sprintf(
		"%d (%s) %s 1 %d %d 0 -1 4194560 1000 0 0 0 150 40 0 0 20 0 1 0 100 %d %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		p.PID, p.Comm, p.State, p.PID, p.PID, p.RSSPages*4096*4, p.RSSPages,
	))
	w.file(filepath.Join(dir, "comm"), p.Comm+"\n")
	w.file(filepath.Join(dir, "cmdline"), nulJoined(p.Cmdline))
	w.file(filepath.Join(dir, "environ"), nulJoined(p.Env))
	ns := p.NetNS
	if ns == 0 {
		ns = HostNetNS
	}
	w.symlink(fmt.Sprintf("net:[%d]", ns), filepath.Join(dir, "ns", "net"))
	w.file(filepath.Join(dir, "net", "dev"), netDev(p.RxBytes, p.TxBytes))
	if p.ServiceAccountNamespace != "" {
		w.file(filepath.Join(dir, "root/var/run/secrets/kubernetes.io/serviceaccount/namespace"), p.ServiceAccountNamespace)
	}
}

func (w *writer) containerV1(c Container) {
	mem := filepath.Join("sys/fs/cgroup/memory", c.CgroupPath)
	limit := c.MemLimit
	if limit == 0 {
		limit = 9223372036854771712 // what v1 shows for no limit on 4 KiB pages
	}
	w.file(filepath.Join(mem, "cgroup.procs"), pidList(c))
	w.file(filepath.Join(mem, "memory.usage_in_bytes"), u64(c.MemUsage))
	w.file(filepath.Join(mem, "memory.limit_in_bytes"), u64(limit))
	w.file(filepath.Join(mem, "memory.max_usage_in_bytes"), u64(c.MemUsage+4096))
	w.file(filepath.Join(mem, "memory.failcnt"), "0\n")
	w.file(filepath.Join(mem, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
	w.file(filepath.Join(mem, "memory.stat"), fmt.Sprintf(
		"cache %d\nrss %d\nmapped_file 0\ninactive_file %d\nactive_file 0\nhierarchical_memory_limit %d\ntotal_cache %d\ntotal_rss %d\ntotal_inactive_file %d\ntotal_active_file 0\n",
		c.InactiveFile, c.MemUsage-c.InactiveFile, c.InactiveFile, limit, c.InactiveFile, c.MemUsage-c.InactiveFile, c.InactiveFile,
	))
	cpu := filepath.Join("sys/fs/cgroup/cpu,cpuacct", c.CgroupPath)
	w.file(filepath.Join(cpu, "cgroup.procs"), pidList(c))
	w.file(filepath.Join(cpu, "cpuacct.usage"), u64(c.CPUUsec*1000))
	w.file(filepath.Join(cpu, "cpuacct.usage_percpu"), fmt.Sprintf("%d %d\n", c.CPUUsec*600, c.CPUUsec*400))
	w.file(filepath.Join(cpu, "cpuacct.stat"), fmt.Sprintf("user %d\nsystem %d\n", c.CPUUsec/10000*7/10, c.CPUUsec/10000*3/10))
	blk := filepath.Join("sys/fs/cgroup/blkio", c.CgroupPath)
	w.file(filepath.Join(blk, "cgroup.procs"), pidList(c))
	w.file(filepath.Join(blk, "blkio.throttle.io_service_bytes"), fmt.Sprintf(
		"254:0 Read %d\n254:0 Write %d\n254:0 Sync 0\n254:0 Async 0\n254:0 Discard 0\n254:0 Total %d\nTotal %d\n",
		c.ReadBytes, c.WriteBytes, c.ReadBytes+c.WriteBytes, c.ReadBytes+c.WriteBytes,
	))
	w.file(filepath.Join(blk, "blkio.throttle.io_serviced"), "254:0 Read 10\n254:0 Write 20\n254:0 Total 30\nTotal 30\n")
}

func (w *writer) containerV2(c Container) {
	dir := filepath.Join("sys/fs/cgroup", c.CgroupPath)
	limit := "max"
	if c.MemLimit != 0 {
		limit = u64(c.MemLimit)
	}
	w.file(filepath.Join(dir, "cgroup.procs"), pidList(c))
	w.file(filepath.Join(dir, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		c.CPUUsec, c.CPUUsec*7/10, c.CPUUsec*3/10))
	w.file(filepath.Join(dir, "memory.current"), u64(c.MemUsage))
	w.file(filepath.Join(dir, "memory.max"), limit+"\n")
	w.file(filepath.Join(dir, "memory.stat"), fmt.Sprintf("anon %d\nfile %d\ninactive_file %d\nactive_file 0\n",
		c.MemUsage-c.InactiveFile, c.InactiveFile, c.InactiveFile))
	w.file(filepath.Join(dir, "io.stat"), fmt.Sprintf("254:0 rbytes=%d wbytes=%d rios=10 wios=20 dbytes=0 dios=0\n", c.ReadBytes, c.WriteBytes))
}

func pidList(c Container) string {
	var b strings.Builder
	for _, pid := range c.ExitedPIDs {
		fmt.Fprintf(&b, "%d\n", pid)
	}
	for i := range c.Processes {
		p := &c.Processes[i]
		fmt.Fprintf(&b, "%d\n", p.PID)
	}
	return b.String()
}

func nulJoined(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.Join(args, "\x00") + "\x00"
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) + "\n" }

func netDev(rx, tx uint64) string {
	return "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
		"    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n" +
		fmt.Sprintf("  eth0: %d     100    0    0    0     0          0         0 %d     200    0    0    0     0       0          0\n", rx, tx)
}

// Busy describes a node running n job pods of one container of two processes each, and its
// sandbox, in burstable pods under the systemd driver: the load benchmarks measure. Every other
// pod's sandbox id sorts before its app container's, as random ids on a real node do.
func Busy(cgroupVersion, n int) Host {
	h := Host{CgroupVersion: cgroupVersion}
	for i := range n {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		id := fmt.Sprintf("1%063x", i)
		env := []string{"PAI_USER_NAME=user", fmt.Sprintf("PAI_JOB_NAME=user~job%d", i), "PAI_CURRENT_TASK_ROLE_NAME=worker", "PAI_TASK_INDEX=0"}
		pid := 10000 + 2*i
		netns := uint32(4026540000 + i)
		h.Pods = append(h.Pods, Pod{
			Sandbox: &Sandbox{ID: fmt.Sprintf("%d%063x", 2*(i%2), i), PID: 10000 + 2*n + i},
			Containers: []Container{{
				CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope",
				Processes: []Process{
					{PID: pid, Comm: "python3", Cmdline: []string{"python3", "train.py"}, Env: env, State: "S", RSSPages: 1000, NetNS: netns, RxBytes: 1000, TxBytes: 2000},
					{PID: pid + 1, Comm: "python3", Cmdline: []string{"python3", "loader.py"}, Env: env, State: "S", RSSPages: 1000, NetNS: netns},
				},
				CPUUsec: 1_000_000, MemUsage: 1 << 30, MemLimit: 4 << 30, InactiveFile: 1 << 20, ReadBytes: 4096, WriteBytes: 8192,
			}},
		})
	}
	return h
}
