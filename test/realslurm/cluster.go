// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package realslurm runs a real single-node Slurm cluster (Debian's slurmctld, slurmd and munged)
// for the tests of what reads Slurm's jobs: in a network and mount namespace of its own, with its
// own slurm.conf, cgroup.conf (proctrack/cgroup and task/cgroup on cgroup v1) and gres.conf of
// GPUs backed by device files it makes. Its daemons are stopped by PID and the cgroups Slurm made
// in the host's tree removed depth-first when it stops, or by the next Start when a run was killed.
package realslurm // import "github.com/otelcol-gpu/otelcol-gpu/test/realslurm"

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/testproc"
)

const (
	// NodeName is the node's Slurm name. Debian builds Slurm with --enable-multiple-slurmd, so
	// its cgroup v1 directories are slurm_<NodeName>: nothing of a real Slurm on the machine.
	NodeName = "otelcolgpu-n1"
	// User is the cluster's one user (in the mount namespace's /etc/passwd only), who submits
	// the jobs.
	User = "alice"
	// UID is User's.
	UID = 4242
	// GPUs is the node's GPU count; GPU i is the device file nvidia<i>, major 195, minor i.
	GPUs = 8
	// Partition is the node's one partition.
	Partition = "gpu"

	nodeIP    = "10.250.34.1"
	ctldPort  = 6817 // free: the cluster's network namespace is its own
	slurmPort = 6818
	nvidiaMaj = 195

	// statePath names the directory of a running cluster, so that a run killed before its
	// teardown is torn down by the next.
	statePath = "/run/otelcol-gpu-realslurm.state"
	// lockPath is held (flock) while a cluster runs: the machine has one slurm_<NodeName>
	// cgroup tree, and a second run waits rather than tearing down the first's cluster.
	lockPath  = "/run/otelcol-gpu-realslurm.lock"
	lockWait  = 15 * time.Minute
	stopGrace = 15 * time.Second
)

// Cluster is a running single-node cluster.
type Cluster struct {
	// Dir holds the configuration, state, logs, the device files and the namespaces' files.
	Dir   string
	state state
	lock  *os.File
}

type state struct {
	Dir     string   `json:"dir"`
	Daemons []daemon `json:"daemons"`
}

type daemon struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/<pid>/stat's start time: tells it from a later PID's
	Log   string `json:"log"`
}

// Conf is the cluster's slurm.conf, which the client commands read through SLURM_CONF.
func (c *Cluster) Conf() string { return filepath.Join(c.Dir, "etc", "slurm.conf") }

// DeviceFile is GPU i's device file.
func (c *Cluster) DeviceFile(i int) string {
	return filepath.Join(c.Dir, "dev", "nvidia"+strconv.Itoa(i))
}

// Start tears down what a killed run left, then starts munged, slurmctld and slurmd and waits
// until the node is idle. On an error it tears down what it started.
func Start() (*Cluster, error) {
	lock, err := acquireLock()
	if err != nil {
		return nil, err
	}
	if leftErr := teardownLeft(); leftErr != nil {
		lock.Close()
		return nil, fmt.Errorf("the cluster of a killed run: %w", leftErr)
	}
	dir, err := os.MkdirTemp("", "realslurm-")
	if err != nil {
		lock.Close()
		return nil, err
	}
	c := &Cluster{Dir: dir, state: state{Dir: dir}, lock: lock}
	if err := c.save(); err != nil {
		os.RemoveAll(dir)
		lock.Close()
		return nil, err
	}
	if err := c.start(); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start() error {
	// The user's jobs read and write the cluster's files (their working directory, the FIFO
	// that ends a job).
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	if err := c.files(); err != nil {
		return err
	}
	if err := c.namespaces(); err != nil {
		return err
	}
	return c.daemons()
}

func (c *Cluster) files() error {
	for _, d := range []string{"etc", "dev", "log", "state", "spool", "work"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.Dir, "work"), 0o777); err != nil {
		return err
	}
	for i := range GPUs {
		if err := unix.Mknod(c.DeviceFile(i), unix.S_IFCHR|0o666, int(unix.Mkdev(nvidiaMaj, uint32(i)))); err != nil {
			return fmt.Errorf("GPU %d's device file: %w", i, err)
		}
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil {
		return err
	}
	files := map[string]string{
		"passwd": string(passwd) + fmt.Sprintf("%s:x:%d:%d::%s:/bin/sh\n", User, UID, UID, filepath.Join(c.Dir, "work")),
		"group":  string(group) + fmt.Sprintf("%s:x:%d:\n", User, UID),
		"slurm.conf": strings.NewReplacer(
			"DIR", c.Dir, "NODE", NodeName, "IP", nodeIP, "CTLDPORT", strconv.Itoa(ctldPort),
			"SLURMDPORT", strconv.Itoa(slurmPort), "GPUS", strconv.Itoa(GPUs), "PARTITION", Partition,
		).Replace(slurmConfTemplate),
		"cgroup.conf": cgroupConf,
		"gres.conf":   fmt.Sprintf("Name=gpu File=%s/dev/nvidia[0-%d]\n", c.Dir, GPUs-1),
	}
	for name, content := range files {
		//nolint:gosec // G306: the daemons and the user's commands read them
		if err := os.WriteFile(filepath.Join(c.Dir, "etc", name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// munged refuses a key others can read.
	return run("mungekey", "--create", "--keyfile="+filepath.Join(c.Dir, "etc", "munge.key"))
}

// slurmConfTemplate: slurmctld runs where the configuration says only on a host of that name,
// or on "localhost"; the daemons run as root (the node's own users are not needed), no
// accounting database (a job's account is taken as given), and the configuration's CPU count
// over the machine's (config_overrides) so that the jobs' steps fit on a small machine;
// jobacct_gather/cgroup, as sites that account jobs run it, makes each step's cpuacct and memory
// cgroups, from which the task receiver reports a step under cgroup v1.
const slurmConfTemplate = `ClusterName=otelcolgpu
SlurmctldHost=localhost(IP)
SlurmctldPort=CTLDPORT
SlurmdPort=SLURMDPORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=DIR/munge.sock
CredType=cred/munge
StateSaveLocation=DIR/state
SlurmdSpoolDir=DIR/spool
SlurmctldPidFile=DIR/slurmctld.pid
SlurmdPidFile=DIR/slurmd.pid
SlurmctldLogFile=DIR/log/slurmctld.log
SlurmdLogFile=DIR/log/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/cgroup
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=NODE NodeAddr=IP CPUs=16 RealMemory=1000 Gres=gpu:GPUS State=UNKNOWN
PartitionName=PARTITION Nodes=NODE Default=YES MaxTime=INFINITE State=UP
`

// cgroupConf: cgroup v1 (this machine's hybrid layout has no systemd, where cgroup/v2 refuses to
// start), and devices constrained, so that each step's devices cgroup lists its GPUs' minors.
const cgroupConf = `CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainDevices=yes
`

func (c *Cluster) mountNS() string { return filepath.Join(c.Dir, "mntns") }
func (c *Cluster) netNS() string   { return filepath.Join(c.Dir, "netns") }

// namespaces makes the cluster's network namespace (loopback and a veth pair whose one end has
// the node's address: getaddrinfo's AI_ADDRCONFIG, which Slurm asks for, finds no address on a
// namespace with loopback only) and its mount namespace, a private copy of the host's with the
// cluster's passwd and group and a /run of its own, each held by a bind mount on a file of Dir.
func (c *Cluster) namespaces() error {
	for _, f := range []string{c.netNS(), c.mountNS()} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return err
		}
	}
	net := []string{"nsenter", "--net=" + c.netNS(), "--"}
	mnt := []string{"nsenter", "--mount=" + c.mountNS(), "--"}
	steps := [][]string{
		{"unshare", "--mount=" + c.mountNS(), "--propagation", "private", "true"},
		{"unshare", "--net=" + c.netNS(), "true"},
		append(net, "ip", "link", "set", "lo", "up"),
		append(net, "ip", "link", "add", "sl0", "type", "veth", "peer", "name", "sl1"),
		append(net, "ip", "addr", "add", nodeIP+"/24", "dev", "sl0"),
		append(net, "ip", "link", "set", "sl0", "up"),
		append(net, "ip", "link", "set", "sl1", "up"),
		append(mnt, "mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"),
		append(mnt, "mount", "--bind", filepath.Join(c.Dir, "etc", "passwd"), "/etc/passwd"),
		append(mnt, "mount", "--bind", filepath.Join(c.Dir, "etc", "group"), "/etc/group"),
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) daemons() error {
	conf := c.Conf()
	etc := filepath.Join(c.Dir, "etc")
	if err := os.Chmod(filepath.Join(etc, "munge.key"), 0o600); err != nil {
		return err
	}
	starts := []struct {
		name string
		argv []string
	}{
		// --force: munged would refuse a socket directory others may write (the cluster's).
		{"munged", []string{
			"munged", "--foreground", "--force", "--socket=" + filepath.Join(c.Dir, "munge.sock"),
			"--key-file=" + filepath.Join(etc, "munge.key"), "--pid-file=" + filepath.Join(c.Dir, "munged.pid"),
			"--seed-file=" + filepath.Join(c.Dir, "munge.seed"),
		}},
		{"slurmctld", []string{"slurmctld", "-D", "-i", "-f", conf}},
		{"slurmd", []string{"slurmd", "-D", "-f", conf, "-N", NodeName}},
	}
	for _, s := range starts {
		if err := c.startDaemon(s.name, s.argv); err != nil {
			return err
		}
		if s.name == "munged" {
			if err := poll.For(30*time.Second, func() error {
				_, err := os.Stat(filepath.Join(c.Dir, "munge.sock"))
				return c.alive(s.name, err)
			}); err != nil {
				return err
			}
		}
	}
	return poll.For(time.Minute, func() error {
		out, err := c.Command("sinfo", "--noheader", "--nodes="+NodeName, "--format=%t").Output()
		if state := strings.TrimSpace(string(out)); err != nil || state != "idle" {
			return c.alive("slurmd", c.alive("slurmctld", fmt.Errorf("node %s is %q, not idle: %w", NodeName, state, err)))
		}
		return nil
	})
}

// alive adds to err the end of the named daemon's log, and makes it permanent if the daemon
// has exited.
func (c *Cluster) alive(name string, err error) error {
	if err == nil {
		return nil
	}
	for _, d := range c.state.Daemons {
		if d.Name != name {
			continue
		}
		err = fmt.Errorf("%w; the end of %s:\n%s", err, d.Log, testproc.Tail(d.Log, 20))
		if start, ok := testproc.StartTime(d.PID); !ok || start != d.Start {
			return poll.Permanent(fmt.Errorf("%s exited: %w", name, err))
		}
	}
	return err
}

// startDaemon runs argv inside the cluster's namespaces (nsenter execs it: its PID is the
// daemon's) in a process group of its own, its output in log/<name>.out, and records it.
func (c *Cluster) startDaemon(name string, argv []string) error {
	logPath := filepath.Join(c.Dir, "log", name+".out")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("nsenter", append([]string{"--mount=" + c.mountNS(), "--net=" + c.netNS(), "--"}, argv...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	// Reaped as it exits: its PID stays its own until the teardown has seen it gone.
	go func() { _ = cmd.Wait() }()
	start, _ := testproc.StartTime(cmd.Process.Pid)
	c.state.Daemons = append(c.state.Daemons, daemon{Name: name, PID: cmd.Process.Pid, Start: start, Log: logPath})
	return c.save()
}

// Command is a Slurm client command (sbatch, srun, squeue, scancel…) run as root inside the
// cluster's namespaces with its slurm.conf.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--mount=" + c.mountNS(), "--net=" + c.netNS(), "--", name}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "SLURM_CONF=" + c.Conf()}
	cmd.Dir = filepath.Join(c.Dir, "work")
	return cmd
}

// AsUser is Command run as User, who submits jobs.
func (c *Cluster) AsUser(name string, args ...string) *exec.Cmd {
	uid := strconv.Itoa(UID)
	cmd := c.Command("setpriv", append([]string{"--reuid=" + uid, "--regid=" + uid, "--clear-groups", name}, args...)...)
	cmd.Env = append(cmd.Env, "HOME="+filepath.Join(c.Dir, "work"), "USER="+User)
	return cmd
}

// Stop cancels every job, stops the daemons by PID, kills what is left in the jobs' cgroups,
// removes those cgroups depth-first, and the namespaces and Dir.
func (c *Cluster) Stop() error {
	if len(c.state.Daemons) > 0 {
		_ = c.Command("scancel", "--full", "--user="+User).Run()
	}
	err := teardown(c.state)
	// Closing the file releases the lock (a killed run's goes with its process).
	c.lock.Close()
	return err
}

// acquireLock waits until no other run holds the machine's cluster.
func acquireLock() (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	err = poll.For(lockWait, func() error {
		if lockErr := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); lockErr != nil {
			return fmt.Errorf("another run holds %s: %w", lockPath, lockErr)
		}
		return nil
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (c *Cluster) save() error {
	b, err := json.Marshal(c.state)
	if err != nil {
		return err
	}
	return os.WriteFile(statePath, b, 0o600)
}

func teardownLeft() error {
	b, err := os.ReadFile(statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", statePath, err)
	}
	return teardown(s)
}

func teardown(s state) error {
	var errs []error
	// slurmd first: it starts no step while the jobs' processes are killed.
	for _, d := range slices.Backward(s.Daemons) {
		if err := stopDaemon(d); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, killNamespace(filepath.Join(s.Dir, "mntns")), removeCgroups())
	for _, f := range []string{"netns", "mntns"} {
		p := filepath.Join(s.Dir, f)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err // the state stays, for the next run to try again
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return err
	}
	if err := os.Remove(statePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func stopDaemon(d daemon) error {
	if start, ok := testproc.StartTime(d.PID); !ok || start != d.Start {
		return nil // gone already, or the PID is another process's now
	}
	_ = syscall.Kill(d.PID, syscall.SIGTERM)
	if poll.For(stopGrace, func() error { return gone(d) }) != nil {
		_ = syscall.Kill(d.PID, syscall.SIGKILL)
		return poll.For(stopGrace, func() error { return gone(d) })
	}
	return nil
}

func gone(d daemon) error {
	if start, ok := testproc.StartTime(d.PID); ok && start == d.Start && !testproc.Zombie(d.PID) {
		return fmt.Errorf("%s (PID %d) still runs", d.Name, d.PID)
	}
	return nil
}

// killNamespace kills, by PID, every process left in the cluster's mount namespace: the
// slurmstepd of a step and its processes, which outlive slurmd, and anything a job started.
func killNamespace(nsFile string) error {
	var ns unix.Stat_t
	if err := unix.Stat(nsFile, &ns); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	link := fmt.Sprintf("mnt:[%d]", ns.Ino)
	if link == self { // the file is not a namespace (never made): nothing is in it
		return nil
	}
	return poll.For(stopGrace, func() error {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		var left []int
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == link && !testproc.Zombie(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left = append(left, pid)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("processes %v are left in the cluster's mount namespace", left)
		}
		return nil
	})
}

// removeCgroups removes the slurm_<node> cgroups Slurm made in the host's hierarchies, deepest
// first (a cgroup with children or processes cannot go).
func removeCgroups() error {
	roots, err := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "slurm_"+NodeName))
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		for _, dir := range slices.Backward(dirs) {
			// A killed process leaves its cgroup a moment after it is reaped.
			err := poll.For(stopGrace, func() error {
				if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
					return fmt.Errorf("remove cgroup %s: %w", dir, err)
				}
				return nil
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
