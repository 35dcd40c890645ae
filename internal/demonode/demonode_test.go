// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package demonode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/cgroupfs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podlogs"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
)

const podsFile = "../../distro/scenarios/pods/dgx-a100-demo.yaml"

// demoGPUs stand for the demo scenario's GPUs, as many and in the same MIG modes (cmd/demonode's
// test holds the scenario to that): 8, GPU 6 in MIG mode with two slices.
func demoGPUs() map[int]GPU {
	gpus := map[int]GPU{}
	for i := range 8 {
		gpus[i] = GPU{UUID: fmt.Sprintf("GPU-%d", i)}
	}
	gpus[6] = GPU{UUID: "GPU-6", MIG: []string{"MIG-6-0", "MIG-6-1"}}
	return gpus
}

// readTrimmed is the content of a file of the node's tree, without surrounding space.
func readTrimmed(t *testing.T, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(elem...))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestStart: the node's tree names each container's pod, and its kubelet lists the running pods
// with their devices resolved to the GPUs' UUIDs.
func TestStart(t *testing.T) {
	pods, err := LoadPods(podsFile)
	require.NoError(t, err)
	gpus := demoGPUs()

	// Short: the node's pod-resources socket lives below it (unix socket paths are limited to 108 bytes).
	dir, err := os.MkdirTemp("", "demonode") //nolint:usetesting // short, as said above
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	node, err := Start(filepath.Join(dir, "n"), pods, gpus)
	require.NoError(t, err)
	t.Cleanup(node.Close)

	found, err := cgroupfs.FindContainers(filepath.Join(node.Root, "sys/fs/cgroup"))
	require.NoError(t, err)
	assert.Len(t, found, 14, "each pod's app container and its sandbox")
	sandboxes := map[string]bool{}
	sandboxFirst := map[bool]int{}
	for _, p := range pods.Pods {
		sandboxes[sandboxID(p)] = true
		sandboxFirst[sandboxID(p) < containerID(p, p.Containers[0])]++
	}
	assert.Positive(t, sandboxFirst[true], "a pod whose sandbox sorts before its app container")
	assert.Positive(t, sandboxFirst[false], "and one whose sandbox sorts after it")
	ix, err := podlogs.Read(node.Root)
	require.NoError(t, err)
	named := 0
	for _, f := range found {
		pid := readTrimmed(t, node.Root, "sys/fs/cgroup", f.Path, "cgroup.procs")
		if sandboxes[f.ID] {
			assert.True(t, f.IsPodSandbox(readTrimmed(t, node.Root, "proc", pid, "comm")), "sandbox %s runs pause", f.Path)
			continue
		}
		if p, ok := ix.PodByUID(f.PodUID); ok {
			named++
			assert.NotEmpty(t, ix.ContainerName(f.PodUID, f.ID), p.Name)
		}
	}
	assert.Equal(t, 6, named, "all but the gone pod's container")

	c, err := podresources.New(podresources.Settings{Socket: Socket(node.Root), RefreshInterval: time.Hour, Timeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.Refresh()
	snap := c.Snapshot()
	require.NotNil(t, snap)
	assert.Len(t, snap.Pods, 6, "the gone pod is not listed")
	alice := snap.Devices[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: "research", Pod: "resnet50-worker-0"}, Container: "trainer"}]
	require.Len(t, alice, 1)
	assert.Equal(t, []string{gpus[0].UUID, gpus[1].UUID, gpus[2].UUID, gpus[3].UUID}, alice[0].IDs)
	bob := snap.Devices[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: "notebooks", Pod: "bob-jupyter"}, Container: "notebook"}]
	assert.Equal(t, []string{gpus[5].UUID + "::0"}, bob[0].IDs)
	dave := snap.Devices[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: "serving", Pod: "bert-infer-0"}, Container: "server"}]
	assert.Equal(t, []string{gpus[6].MIG[0]}, dave[0].IDs)
	assert.True(t, slices.ContainsFunc(snap.Allocatable, func(d podresources.Device) bool { return slices.Contains(d.IDs, gpus[6].MIG[1]) }))

	// frank's GPU comes through DRA: his claim, its CDI spec, and the driver's file naming the GPU.
	frank := snap.Claims[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: "research", Pod: "llm-eval-0"}, Container: "eval"}]
	require.Len(t, frank, 1)
	assert.Equal(t, "llm-eval-gpu", frank[0].Name)
	require.Len(t, frank[0].Devices, 1)
	device := frank[0].Devices[0]
	assert.Equal(t, []string{"gpu.nvidia.com", "gpu-7"}, []string{device.Driver, device.Device})
	specs, err := cdi.NewReader(node.Root, cdi.DefaultSpecDirs).Read()
	require.NoError(t, err)
	require.Len(t, device.CDIDevices, 1)
	assert.Contains(t, specs[device.CDIDevices[0]], "/dev/nvidia7")
	assert.Contains(t, readTrimmed(t, node.Root, "proc/driver/nvidia/gpus/0000:08:00.0/information"), "GPU UUID: \t "+gpus[7].UUID)
	assert.Len(t, snap.Claims, 1, "the other pods' GPUs come from device plugins")
}

func TestClaimErrors(t *testing.T) {
	gpus := map[int]GPU{0: {UUID: "GPU-a"}}
	for id, want := range map[string]string{
		"gpu:9":   `device "gpu:9": want gpu:N, a GPU of the scenario`,
		"mig:0:0": `device "mig:0:0": want gpu:N, a GPU of the scenario`,
	} {
		_, err := nvidiaClaim(Pod{Namespace: "ns", Name: "p"}, Claim{Name: "c", Devices: []string{id}}, gpus)
		assert.EqualError(t, err, want, id)
	}
}

func TestDeviceIDErrors(t *testing.T) {
	gpus := map[int]GPU{0: {UUID: "GPU-a"}}
	for id, want := range map[string]string{
		"gpu:9":   "no GPU 9",
		"mig:0:0": "GPU 0 has no MIG slice 0",
		"tpu:0":   "want gpu:N, gpu:N::R or mig:N:I",
	} {
		_, err := deviceID(id, gpus)
		assert.ErrorContains(t, err, want, id)
	}
}

// TestStartAMD: on an AMD node the kubelet hands the GPUs out as ROCm's device plugin does
// (amd.com/gpu, PCI addresses), and the node has no NVIDIA driver files.
func TestStartAMD(t *testing.T) {
	pods, err := LoadPods("../../distro/scenarios/pods/mi300x-demo.yaml")
	require.NoError(t, err)
	gpus := AMDGPUs(amdgpufixture.MI300X())
	require.Len(t, gpus, 8)
	assert.Equal(t, GPU{UUID: "GPU-4b7a3c1e9d2f0500", PCIAddress: "0000:05:00.0"}, gpus[0])

	dir, err := os.MkdirTemp("", "demonode") //nolint:usetesting // short: the socket's path is limited
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	node, err := Start(filepath.Join(dir, "n"), pods, gpus)
	require.NoError(t, err)
	t.Cleanup(node.Close)
	_, err = os.Stat(filepath.Join(node.Root, "proc/driver/nvidia"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	c, err := podresources.New(podresources.Settings{Socket: Socket(node.Root), RefreshInterval: time.Hour, Timeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.Refresh()
	snap := c.Snapshot()
	require.NotNil(t, snap)
	alice := snap.Devices[podresources.ContainerKey{PodKey: podresources.PodKey{Namespace: "research", Pod: "llama-pretrain-0"}, Container: "trainer"}]
	require.Len(t, alice, 1)
	assert.Equal(t, "amd.com/gpu", alice[0].Resource)
	assert.Equal(t, []string{"0000:05:00.0", "0000:15:00.0", "0000:65:00.0", "0000:75:00.0"}, alice[0].IDs)
	require.Len(t, snap.Allocatable, 1)
	assert.Equal(t, "amd.com/gpu", snap.Allocatable[0].Resource)
	assert.Len(t, snap.Allocatable[0].IDs, 8)

	_, err = deviceID("gpu:0::1", gpus)
	assert.EqualError(t, err, `device "gpu:0::1": ROCm's device plugin has no time-slicing replicas`)
}

// TestScenarioGPUs: the GPUs' identities come from the scenario, without running the receiver:
// derived from the seed, or a capture's, whose PCI addresses name the driver's /proc entries.
func TestScenarioGPUs(t *testing.T) {
	sc, err := gpuscenario.Load("../../distro/scenarios/dgx-a100-demo.yaml")
	require.NoError(t, err)
	gpus, amd, err := ScenarioGPUs(sc)
	require.NoError(t, err)
	assert.Nil(t, amd)
	require.Len(t, gpus, 8)
	assert.Equal(t, GPU{UUID: sc.UUID(6), MIG: sc.MIGUUIDs(6), NvidiaBusID: "0000:07:00.0"}, gpus[6])
	assert.Len(t, gpus[6].MIG, 2)

	sc, err = gpuscenario.Load("../gpuscenario/testdata/replay-k80.yaml")
	require.NoError(t, err)
	gpus, _, err = ScenarioGPUs(sc)
	require.NoError(t, err)
	require.Len(t, gpus, 4)
	assert.Equal(t, GPU{UUID: "GPU-3341aba2-f01d-2c1f-7dd4-e389779faec2", NvidiaBusID: "f8d6:00:00.0"}, gpus[3])
	node, err := Start(filepath.Join(t.TempDir(), "node"), &Pods{}, gpus)
	require.NoError(t, err)
	t.Cleanup(node.Close)
	assert.Contains(t, readTrimmed(t, node.Root, "proc", "driver", "nvidia", "gpus", "f8d6:00:00.0", "information"), "GPU-3341aba2-f01d-2c1f-7dd4-e389779faec2")

	sc, err = gpuscenario.Load("../gpuscenario/testdata/replay-mi308x.yaml")
	require.NoError(t, err)
	gpus, amd, err = ScenarioGPUs(sc)
	require.NoError(t, err)
	require.NotNil(t, amd, "an AMD node's files are demonode's to write")
	assert.Equal(t, GPU{UUID: "GPU-084cafeae17e7696", PCIAddress: "0000:0a:00.0"}, gpus[0])
}
