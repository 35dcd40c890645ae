// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

const (
	id  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	uid = "8d6d4f1e-1d5a-4a3c-9f3e-2b1c0a9e7d11"
)

func TestParseContainer(t *testing.T) {
	uidU := strings.ReplaceAll(uid, "-", "_")
	tests := []struct {
		path string
		want Container
		ok   bool
	}{
		// cgroupfs driver, v1 or v2
		{"/kubepods/pod" + uid + "/" + id, Container{ID: id, PodUID: uid}, true},
		{"/kubepods/burstable/pod" + uid + "/" + id, Container{ID: id, PodUID: uid}, true},
		{"/kubepods/besteffort/pod" + uid + "/" + id + "/", Container{ID: id, PodUID: uid}, true},
		// systemd driver
		{"/kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + id + ".scope", Container{ID: id, Runtime: "containerd", PodUID: uid}, true},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-" + id + ".scope", Container{ID: id, Runtime: "cri-o", PodUID: uid}, true},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/docker-" + id + ".scope", Container{ID: id, Runtime: "docker", PodUID: uid}, true},
		// kubelet under its own slice (kind, some installers)
		{"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidU + ".slice/cri-containerd-" + id + ".scope", Container{ID: id, Runtime: "containerd", PodUID: uid}, true},
		// plain docker
		{"/docker/" + id, Container{ID: id, Runtime: "docker"}, true},
		{"/system.slice/docker-" + id + ".scope", Container{ID: id, Runtime: "docker"}, true},
		// not containers
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-conmon-" + id + ".scope", Container{}, false},
		{"/kubepods/burstable/pod" + uid, Container{}, false},
		{"/system.slice/containerd.service", Container{}, false},
		{"/user.slice/" + id, Container{}, false},
		{"/docker/" + id + "/nested", Container{}, false},
		{"/docker/" + strings.ToUpper(id), Container{}, false},
		// the systemd notation as a directory name (kubelet on systemd, the runtime on cgroupfs)
		{"/system.slice/containerd.service/kubepods-besteffort-pod" + uidU + ".slice:cri-containerd:" + id, Container{ID: id, Runtime: "containerd", PodUID: uid}, true},
		{"/kubepods-pod" + uidU + ".slice:crio:" + id, Container{ID: id, Runtime: "cri-o", PodUID: uid}, true},
		{"/kubepods-pod" + uidU + ".slice:conmon:" + id, Container{}, false},
		{"/system.slice:cri-containerd:" + id, Container{}, false},
		{"/kubepods-pod" + uidU + ".slice:cri-containerd:" + id + ":x", Container{}, false},
		{"", Container{}, false},
		{"/", Container{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := ParseContainer(tt.path)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestContainerOf(t *testing.T) {
	for _, tt := range []struct {
		path string
		want Container
		ok   bool
	}{
		{"/kubepods/burstable/pod" + uid + "/" + id, Container{ID: id, PodUID: uid}, true},
		{"/kubepods/burstable/pod" + uid + "/" + id + "/kube-proxy", Container{ID: id, PodUID: uid}, true},
		{"/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope/init.scope/", Container{ID: id, Runtime: "containerd", PodUID: uid}, true},
		{"/docker/" + strings.Repeat("ab", 32) + "/docker/" + id + "/a/b", Container{ID: id, Runtime: "docker"}, true},
		{"/kubepods/burstable/pod" + uid, Container{}, false},
		{"/../..", Container{}, false},
		{"/", Container{}, false},
		{"", Container{}, false},
	} {
		got, ok := ContainerOf(tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
}

func FuzzParseContainer(f *testing.F) {
	f.Add("/kubepods/burstable/pod" + uid + "/" + id)
	f.Add("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/crio-" + id + ".scope")
	f.Add("/docker/" + id)
	f.Add("0::/")
	f.Add("/system.slice/containerd.service/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice:cri-containerd:" + id)
	f.Add("/kubepods/burstable/pod" + uid + "/" + id + "/kube-proxy")
	f.Fuzz(func(t *testing.T, p string) {
		if c, ok := ContainerOf(p); ok && !strings.Contains(p, c.ID) {
			t.Fatalf("ContainerOf: id %q is not in path %q", c.ID, p)
		}
		c, ok := ParseContainer(p)
		if !ok {
			if c != (Container{}) {
				t.Fatalf("rejected path %q returned %+v", p, c)
			}
			return
		}
		if !isContainerID(c.ID) {
			t.Fatalf("accepted path %q with id %q", p, c.ID)
		}
		if c.PodUID != "" && !isPodUID(c.PodUID) {
			t.Fatalf("accepted path %q with pod uid %q", p, c.PodUID)
		}
		if !strings.Contains(p, c.ID) {
			t.Fatalf("id %q is not in path %q", c.ID, p)
		}
	})
}
