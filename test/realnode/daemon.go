// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/testproc"
)

// daemon is one of the node's processes (etcd, the control plane, containerd, the kubelet,
// kube-proxy), run inside the node's namespaces and stopped by its PID.
type daemon struct {
	name   string
	argv   []string // what nsenter runs, for a restart
	log    string
	pid    int
	exited chan struct{}
}

// startDaemon runs bin with args inside the node's network and mount namespaces (nsenter execs
// it, so its PID is the daemon's), its output appended to logs/<name>.log, in a process group of
// its own (a ^C to the test does not reach it before the teardown does). Its PID is in the state
// file before this returns.
func (n *Node) startDaemon(name, bin string, args ...string) (*daemon, error) {
	d := &daemon{name: name, argv: append([]string{bin}, args...), log: filepath.Join(n.Dir, "logs", name+".log")}
	return d, n.run(d)
}

func (n *Node) run(d *daemon) error {
	log, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", append([]string{"--mount=" + n.state.mountNS(), "--net=" + n.state.netNS(), "--"}, d.argv...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", d.name, err)
	}
	d.pid, d.exited = cmd.Process.Pid, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(d.exited)
	}()
	start, _ := testproc.StartTime(d.pid)
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, r := range n.state.Daemons {
		if r.Name == d.name {
			n.state.Daemons = append(n.state.Daemons[:i], n.state.Daemons[i+1:]...)
			break
		}
	}
	n.state.Daemons = append(n.state.Daemons, daemonRecord{Name: d.name, PID: d.pid, Start: start})
	return n.state.save()
}

// stop stops the daemon (SIGTERM, SIGKILL after stopGrace) and waits until it has exited.
func (d *daemon) stop() {
	_ = syscall.Kill(d.pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(stopGrace):
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
		<-d.exited
	}
}

// waitUntil polls ready until it holds; it fails at once if the daemon exits, and after within,
// both with the end of the daemon's log.
func (d *daemon) waitUntil(within time.Duration, what string, ready func(context.Context) bool) error {
	err := poll.For(within, func() error {
		select {
		case <-d.exited:
			return poll.Permanent(fmt.Errorf("%s exited before %s", d.name, what))
		default:
		}
		// One answer may take a while (an API server still starting), not all of the wait.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ready(ctx) {
			return nil
		}
		return fmt.Errorf("%s: not %s after %s", d.name, what, within)
	})
	if err != nil {
		return fmt.Errorf("%w; the end of %s:\n%s", err, d.log, testproc.Tail(d.log, 30))
	}
	return nil
}
