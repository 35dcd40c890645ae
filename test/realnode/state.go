// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// lockPath is the machine's one real node: the kubelet hard-codes paths such as
// /var/lib/kubelet/device-plugins and /var/log/pods, and the kubepods cgroups are the machine's.
// The file exists only while a node runs (or its teardown has not finished).
const lockPath = "/run/otelcol-gpu-realnode.lock"

// kubeletSysctls are the global kernel settings the kubelet sets when it starts (its
// setupKernelTunables, with protectKernelDefaults off; on, it would refuse to start instead).
// They are put back when the node goes.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// state is what the node changed on the machine, written down before each change is made, so
// that the teardown undoes exactly that even when it runs in another process: the reaper, or the
// next run after this one was killed.
type state struct {
	// Dir is the node's directory: its configuration, data, logs, and the files that hold its
	// network and mount namespaces.
	Dir string `json:"dir"`
	// Sysctls are the kubeletSysctls' values before the kubelet started.
	Sysctls map[string]string `json:"sysctls"`
	// Daemons are the processes the harness started, by PID.
	Daemons []daemonRecord `json:"daemons"`
}

// daemonRecord names a process: its start time (in clock ticks since boot, /proc/<pid>/stat)
// tells it from another process that got its PID after it exited.
type daemonRecord struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

func (s *state) mountNS() string { return filepath.Join(s.Dir, "mntns") }
func (s *state) netNS() string   { return filepath.Join(s.Dir, "netns") }

// lock is the machine-wide lock, held by the process that runs the node.
type lock struct{ f *os.File }

// acquireLock takes the machine's node lock, waiting up to wait for another node to go.
func acquireLock(wait time.Duration) (*lock, error) {
	var l *lock
	err := poll.For(wait, func() error {
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return poll.Permanent(err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return fmt.Errorf("another real node runs on this machine (%s is locked) and did not go within %s", lockPath, wait)
			}
			return poll.Permanent(err)
		}
		// The holder before us may have removed the file after we opened it: a lock on a
		// removed file locks nothing.
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(lockPath, &now) != nil || held.Ino != now.Ino {
			f.Close()
			return fmt.Errorf("%s was removed while it was being locked", lockPath)
		}
		l = &lock{f: f}
		return nil
	})
	return l, err
}

// statePath is where the state is kept: beside the lock, so that a later run finds it.
func statePath() string { return lockPath + ".state" }

// readState reads the state a run left; nil when there is none.
func readState() (*state, error) {
	data, err := os.ReadFile(statePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(), err)
	}
	return &s, nil
}

// save writes the state atomically.
func (s *state) save() error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

// release removes the lock file and unlocks.
func (l *lock) release() {
	_ = os.Remove(lockPath)
	_ = l.f.Close()
}

// teardown undoes everything s records, in an order that lets each step succeed: the kubelet
// first (it would restart containers), then every container and its shim, then the other
// daemons, anything else still in the node's namespaces, the namespaces themselves, the
// kubepods cgroups, the kernel settings, and the node's directory. It goes on after a failed
// step and returns every failure.
func teardown(s *state, logf func(string, ...any)) error {
	var errs []error
	for _, d := range s.Daemons {
		if d.Name == "kubelet" {
			stopRecorded(d, logf)
		}
	}
	containerdAddress := filepath.Join(s.Dir, "containerd", "containerd.sock")
	for _, pid := range processes(func(_ int, cmdline []string) bool {
		return len(cmdline) > 0 && strings.HasPrefix(filepath.Base(cmdline[0]), "containerd-shim") && slices.Contains(cmdline, containerdAddress)
	}) {
		killTree(pid)
	}
	for _, v := range slices.Backward(s.Daemons) {
		stopRecorded(v, logf)
	}
	// Whatever else runs in the node's namespaces: a kubectl or CNI plugin in flight, a
	// container the shims no longer knew.
	var inNode []uint64
	for _, ns := range []string{s.netNS(), s.mountNS()} {
		var st unix.Stat_t
		if unix.Stat(ns, &st) == nil {
			inNode = append(inNode, st.Ino)
		}
	}
	for _, pid := range processes(func(pid int, _ []string) bool {
		for _, kind := range []string{"net", "mnt"} {
			var st unix.Stat_t
			if unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), &st) == nil && slices.Contains(inNode, st.Ino) {
				return true
			}
		}
		return false
	}) {
		logf("realnode: process %d was still in the node's namespaces: killed", pid)
		killTree(pid)
	}
	for _, ns := range []string{s.mountNS(), s.netNS()} {
		if err := unix.Unmount(ns, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", ns, err))
		}
	}
	if err := removeKubepods(); err != nil {
		errs = append(errs, err)
	}
	for key, value := range s.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", key, value, err))
		}
	}
	if s.Dir != "" {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopRecorded stops a recorded daemon that still runs as itself: SIGTERM, then SIGKILL after
// stopGrace, and waits until it is gone.
func stopRecorded(d daemonRecord, logf func(string, ...any)) {
	if start, ok := testproc.StartTime(d.PID); !ok || start != d.Start {
		return
	}
	_ = syscall.Kill(d.PID, syscall.SIGTERM)
	if waitGone(d, stopGrace) {
		return
	}
	logf("realnode: %s (pid %d) still running %s after SIGTERM: killed", d.Name, d.PID, stopGrace)
	_ = syscall.Kill(d.PID, syscall.SIGKILL)
	waitGone(d, stopGrace)
}

// stopGrace is how long a daemon has to exit after SIGTERM: enough for the kubelet, containerd
// and etcd. The API server would drain its requests for up to a minute, which a node being
// removed need not wait for.
const stopGrace = 3 * time.Second

// waitGone waits until d has exited (reaped by its parent, or by init); false after within.
func waitGone(d daemonRecord, within time.Duration) bool {
	return poll.For(within, func() error {
		if start, ok := testproc.StartTime(d.PID); !ok || start != d.Start || testproc.Zombie(d.PID) {
			return nil
		}
		return errors.New("running")
	}) == nil
}

// killTree kills pid and every process descended from it, children first, so that none is left
// to be re-parented and forgotten.
func killTree(pid int) {
	for _, child := range children(pid) {
		killTree(child)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// processes lists the processes for which match holds.
func processes(match func(pid int, cmdline []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if match(pid, strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// children are pid's child processes.
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(raw)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// removeKubepods removes the kubelet's cgroups (kubepods and everything under it, deepest
// first) from every hierarchy, waiting a moment for killed processes to leave them.
func removeKubepods() error {
	var dirs []string
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range append(hierarchies, "/sys/fs/cgroup") {
		for _, name := range []string{"kubepods", "kubepods.slice"} {
			root := filepath.Join(h, name)
			_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
		}
	}
	// Deepest first: a cgroup goes only once its children have.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, d := range dirs {
		if err := poll.For(10*time.Second, func() error {
			if err := unix.Rmdir(d); !errors.Is(err, unix.ENOENT) {
				return err
			}
			return nil
		}); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
