// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
)

// probe is a pod made of the agent's own pod template, as the installed DaemonSet has it (the
// same securityContext, host namespaces and volumes), with busybox in place of the agent: what a
// process in the agent's container can do to its host.
const probe = "agent-probe"

func startProbe(t *testing.T) *corev1.Pod {
	t.Helper()
	ds, err := node.Admin.AppsV1().DaemonSets(namespace).Get(t.Context(), "otelcol-gpu-agent", metav1.GetOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: probe, Namespace: namespace}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = realnode.BusyboxImage, corev1.PullNever
	c.Command, c.Args = []string{"/bin/busybox", "sleep", "86400"}, nil
	// It serves nothing, and on the host network its ports would be the agent's.
	c.Ports, c.LivenessProbe, c.ReadinessProbe = nil, nil, nil
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	_, err = node.Admin.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = node.Admin.CoreV1().Pods(namespace).Delete(context.WithoutCancel(t.Context()), probe, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	waitRunning(t, namespace, probe)
	return pod
}

// inProbe runs a shell script in the probe; its output, and whether it exited 0.
func inProbe(t *testing.T, script string) (string, bool) {
	t.Helper()
	out, err := node.Kubectl(nil, "exec", "-n", namespace, probe, "--", "/bin/busybox", "sh", "-c", script)
	return strings.TrimSpace(out), err == nil
}

// mounts reads a mountinfo: each mount point's last (topmost) mount, and whether it is
// read-only.
func mounts(mountinfo string) map[string]bool {
	ro := map[string]bool{}
	for line := range strings.SplitSeq(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		ro[strings.ReplaceAll(f[4], `\040`, " ")] = slices.Contains(strings.Split(f[5], ","), "ro")
	}
	return ro
}

// testHostAccess: what the agent's container, as deploy/ makes it, can do to the node.
//   - /hostfs is read-only at the top only: every mount below it keeps the node's own flags, so
//     the node's writable mounts (/proc, /sys, /dev, /run, /var/lib, /var/log here, pods'
//     volumes) are writable from the agent. deploy/ keeps it so (HostToContainer); the list is
//     logged, and deploy/README.md names these paths.
//   - /dev/kmsg cannot be opened, although the node's /dev is there: the runtime's device cgroup
//     refuses it, which is why deploy/ has no kmsg mount and no SYSLOG.
//   - With the node's PID namespace and SYS_PTRACE (to read containers' environments), root in
//     the container reaches a node process's root directory through /proc/<pid>/root (the
//     kubelet's here: this machine's PID 1 is shielded even from root), read-write: no read-only
//     mount bounds the agent (deploy/README.md).
func testHostAccess(t *testing.T) {
	pod := startProbe(t)
	// The probe's own mounts below /hostfs: its volumes, and those runc makes in its root
	// filesystem (/proc, /sys, /dev), which the node's root filesystem holds.
	var ownMounts []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/hostfs/") {
			ownMounts = append(ownMounts, m.MountPath)
		}
	}
	ownRoot := "/hostfs" + node.ContainerRoot(containerID(t, namespace, probe, "agent")) + "/"

	var writable []string
	poll.UntilNoError(t, time.Minute, "every mount below /hostfs to have the node's flags", func() error {
		inside, ok := inProbe(t, "cat /proc/self/mountinfo")
		if !ok {
			return fmt.Errorf("the probe's mountinfo: %s", inside)
		}
		nodeInfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", node.KubeletPID()))
		if err != nil {
			return err
		}
		container, host := mounts(inside), mounts(string(nodeInfo))
		if !container["/hostfs"] {
			return errors.New("/hostfs is not read-only")
		}
		var differ []string
		writable = nil
		for mp, ro := range container {
			path, below := strings.CutPrefix(mp, "/hostfs/")
			if !below || slices.Contains(ownMounts, mp) || strings.HasPrefix(mp, ownRoot) {
				continue
			}
			hostRO, ok := host["/"+path]
			if !ok || hostRO != ro {
				differ = append(differ, fmt.Sprintf("%s (read-only in the container: %t, on the node: %t, %t)", mp, ro, hostRO, ok))
			}
			if !ro {
				writable = append(writable, "/"+path)
			}
		}
		if len(differ) > 0 {
			return fmt.Errorf("%v", differ)
		}
		return nil
	})
	slices.Sort(writable)
	t.Logf("writable below /hostfs (the node's writable mounts): %s", summarize(writable))
	for _, path := range []string{"/proc", "/sys", "/dev", "/run", "/var/lib", "/var/log"} {
		assert.Contains(t, writable, path)
	}

	out, ok := inProbe(t, "touch /hostfs/etc/probe")
	assert.False(t, ok, "the node's root filesystem is read-only at /hostfs")
	assert.Contains(t, out, "Read-only file system")
	out, ok = inProbe(t, "touch /hostfs/var/lib/kubelet/probe && rm /hostfs/var/lib/kubelet/probe")
	assert.True(t, ok, "a mount below /hostfs (the node's /var/lib) is writable: %s", out)

	out, ok = inProbe(t, "head -c 1 /hostfs/dev/kmsg")
	assert.False(t, ok, "the kernel log cannot be read")
	assert.Contains(t, out, "Operation not permitted", "the device cgroup refuses /dev/kmsg")

	marker := filepath.Join(node.Dir, "written-by-the-agents-container")
	out, ok = inProbe(t, fmt.Sprintf("touch /proc/%d/root%s", node.KubeletPID(), marker))
	assert.True(t, ok, "the node's root through the kubelet's /proc/<pid>/root: %s", out)
	_, err := os.Stat(marker)
	assert.NoError(t, err, "the container wrote a file on the node through /proc/<pid>/root")
	_ = os.Remove(marker)
}

// summarize lists the paths at most two levels deep and counts the others (pods' volumes,
// containers' root filesystems, network namespaces).
func summarize(paths []string) string {
	var shown []string
	for _, p := range paths {
		if strings.Count(p, "/") <= 2 {
			shown = append(shown, p)
		}
	}
	return fmt.Sprintf("%s, and %d mounts below them", strings.Join(shown, " "), len(paths)-len(shown))
}
