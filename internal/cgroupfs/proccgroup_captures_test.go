// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cgroupfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
)

// TestProcCgroupCaptures reads real /proc/<pid>/cgroup files (testdata/captures/SOURCE.md) as GPU
// attribution does: procfs splits the lines, and the first path that is (or is inside) a
// container names it.
func TestProcCgroupCaptures(t *testing.T) {
	none := cgroupfs.Container{}
	for file, want := range map[string]cgroupfs.Container{
		// Outside Kubernetes.
		"docker-centos-systemd-v1":      {ID: "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d", Runtime: "docker"},
		"docker-ubuntu-v1":              {ID: "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30", Runtime: "docker"},
		"docker-in-docker-rancheros-v1": {ID: "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a", Runtime: "docker"},
		// An id alone below the root names no runtime: not taken for a container.
		"docker-debian-v1": none,
		// Seen from a container's cgroup namespace: paths relative to its root ("/..").
		"docker-cgroupns-v2": {ID: "1f1d6e2d4940ddac13abd421a2617992bf89f0e0f9a902ed58278c5f843e9ae7", Runtime: "docker"},
		// Kubernetes, cgroupfs driver.
		"k8s-docker-cgroupfs-v1":                    {ID: "cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c", PodUID: "74ba62da-1a3d-11e7-bb11-080027cb0e22"},
		"k8s-docker-gke-v1":                         {ID: "34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376", PodUID: "74c13223-5a00-11e9-b385-42010a80018d"},
		"k8s-docker-cgroupfs-merged-controllers-v1": {ID: "da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d", PodUID: "1fe19bf5-e8ef-11e8-900c-52daee5a874d"},
		"k8s-containerd-1.2-cgroupfs-v1":            {ID: "5dd96d5394ca930a854a390ea46f7515a8bc930123eb3251ba20f2708a38fc61", PodUID: "a36d0c1d-0b26-4451-8d80-9c195e004afa"},
		// kube-proxy moves itself into a cgroup below its container's.
		"k8s-kube-proxy-nested-v1": {ID: "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903", PodUID: "f8a694f2-7c08-11e9-98da-000c29077430"},
		// Kubernetes, systemd driver.
		"k8s-docker-systemd-v1":                  {ID: "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70", Runtime: "docker", PodUID: "045b1e35-7f13-11e7-ac42-0050568ffca0"},
		"k8s-containerd-systemd-bottlerocket-v1": {ID: "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830", Runtime: "containerd", PodUID: "dd1bf9d1-241d-47f5-8e25-12de83135812"},
		"k8s-crio-1.19-v1":                       {ID: "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607", Runtime: "cri-o", PodUID: "8ca306fa-3c03-47fa-97dd-19979c345572"},
		// A static pod: its UID is the hash of its manifest.
		"k8s-crio-1.17-static-pod-v1": {ID: "7a1fd6fe8cdfbd44dc78c4cc85dad7031eaab4365801684cad0aabdeaf863f9e", Runtime: "cri-o", PodUID: "487a0dc6dccaeefbcfedba7a7ce1ca18"},
		"k8s-crio-1.22-v2":            {ID: "f33f47b0db740bb647cb3e7ac62d96c74966dbb99cbfaf4563bfd42d387e8b44", Runtime: "cri-o", PodUID: "042efd86-1f3b-4f2f-8736-f31c58e95bbc"},
		"k8s-containerd-1.6-v2":       {ID: "25d057a4c6c9555f2a0eb106e8896968c28f1c44aca4754174851aca7f89ad26", Runtime: "containerd", PodUID: "9493223b-520e-4a97-a45f-359dcf967006"},
		"k8s-docker-cgroupns-v2":      {ID: "2cc65c162ca1388b6b8d5ccfb701d22fc96675ccf8b2f1590c490c2c4039547f", Runtime: "docker", PodUID: "fd698699-eabf-4c23-92ef-cf0bbdb78261"},
		// The kubelet on the systemd driver, containerd on cgroupfs: runc names the directory after
		// the systemd notation slice:prefix:name.
		"k8s-containerd-1.4-systemd-notation-v1": {ID: "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e", Runtime: "containerd", PodUID: "2105e389-7471-476e-a50f-6074cef29bbd"},
		// The host's own processes.
		"host-process-v1":          none,
		"host-session-v1":          none,
		"host-init-v2":             none,
		"host-init-cgroupns-v2":    none,
		"host-process-cgroupns-v2": none,
	} {
		t.Run(file, func(t *testing.T) {
			assert.Equal(t, want, containerOfCapture(t, file))
		})
	}
}

// containerOfCapture puts a capture at /proc/1/cgroup of a fake /proc and resolves it.
func containerOfCapture(t *testing.T, file string) cgroupfs.Container {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(captures, "proc-cgroup", file))
	require.NoError(t, err)
	proc := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(proc, "1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "cgroup"), data, 0o600))
	fs, err := procfs.NewFS(proc)
	require.NoError(t, err)
	p, err := fs.Proc(1)
	require.NoError(t, err)
	cgroups, err := p.Cgroups()
	require.NoError(t, err)
	for _, cg := range cgroups {
		if c, ok := cgroupfs.ContainerOf(cg.Path); ok {
			return c
		}
	}
	return cgroupfs.Container{}
}
