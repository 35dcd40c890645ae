// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// devMinor is the /dev/nvidia minor of the GPU of NVML index i on the DRA node: the reverse of
// NVML's order, so that a join that took a DRA device name's number (gpu-<minor>) for
// minor_number would put every job on another GPU.
func devMinor(i int) int { return 7 - i }

// extendedHolder is the DRA node's pod that asked for nvidia.com/gpu, served by the DRA driver
// (Kubernetes 1.37, DRAExtendedResource): no ResourceClaim of its own.
const extendedHolder = 10

// draClaims are the claims NVIDIA's DRA driver prepared on the DRA node (testdata/scenarios/
// node.yaml's GPUs): alice's two whole GPUs in one claim, bob's and carol's claims sharing GPU 2
// (share_id), dave's MIG device (the batch's first slice of GPU 3), and the claim the scheduler
// generated for the extended-resource pod, on GPU 7.
type draClaims struct {
	alice, bob, carol, dave, extended podresourcestest.NvidiaClaim
}

func newDRAClaims(tb testing.TB, slice migReading) draClaims {
	tb.Helper()
	gi, err := strconv.Atoi(slice.gi)
	require.NoError(tb, err)
	ci, err := strconv.Atoi(slice.ci)
	require.NoError(tb, err)
	gpu := func(i int) podresourcestest.NvidiaDevice { return podresourcestest.NvidiaDevice{Minor: devMinor(i)} }
	claim := func(uid, namespace, name string, devices ...podresourcestest.NvidiaDevice) podresourcestest.NvidiaClaim {
		return podresourcestest.NvidiaClaim{UID: uid, Namespace: namespace, Name: name, Pool: "gpu-node-07", Devices: devices}
	}
	shared := func(i int, share string) podresourcestest.NvidiaDevice {
		d := gpu(i)
		d.ShareID = share
		return d
	}
	return draClaims{
		alice: claim("a11ce000-0000-4000-8000-000000000001", "team-a", "resnet-gpus", gpu(0), gpu(1)),
		bob:   claim("b0b00000-0000-4000-8000-000000000002", "team-b", "bob-share", shared(2, "5e0f4b1a-0000-4000-8000-00000000000b")),
		carol: claim("ca201000-0000-4000-8000-000000000003", "team-c", "carol-share", shared(2, "5e0f4b1a-0000-4000-8000-00000000000c")),
		dave: claim("da7e0000-0000-4000-8000-000000000004", "serving", "bert-mig",
			podresourcestest.NvidiaDevice{Minor: devMinor(3), MIG: &podresourcestest.MIGInstance{GI: gi, CI: ci}}),
		extended: claim("e7e00000-0000-4000-8000-000000000010", "team-h", "infer-7-extended-resources-k7x2q", gpu(7)),
	}
}

// draHost is the test node with the NVIDIA driver's files, the claims' CDI specs and the
// extended-resource pod; the DRA pods' processes carry what the specs put in their environment.
func draHost(batch gpuIDs, claims draClaims) hostfixture.Host {
	host := testHost()
	for _, n := range []int{trainer, shareA, shareB, migInfer} {
		procs := host.Pods[n-1].Containers[0].Processes
		for i := range procs {
			procs[i].Env = append(procs[i].Env, "NVIDIA_VISIBLE_DEVICES=void")
		}
	}
	host.Pods = append(host.Pods, pod(extendedHolder, &hostfixture.PodLogs{Namespace: "team-h", Name: "infer-7", Container: "server"},
		[]int{10001}, append(paiEnv("ivy", "infer"), "NVIDIA_VISIBLE_DEVICES=void")...))
	for i := range len(batch) {
		host.NvidiaGPUs = append(host.NvidiaGPUs, hostfixture.NvidiaGPU{BusID: fmt.Sprintf("0000:%02x:00.0", i+1), Minor: devMinor(i), UUID: batch[i].UUID})
	}
	host.CDISpecs = map[string]string{}
	for _, c := range []podresourcestest.NvidiaClaim{claims.alice, claims.bob, claims.carol, claims.dave, claims.extended} {
		file, spec := c.CDISpec()
		host.CDISpecs[file] = spec
	}
	return host
}

// draKubeletPods is what the kubelet lists on the DRA node: DRA claims for most pods, the device
// plugin for grace's (a node where some pods use the device plugin and some DRA), nothing for
// frank's (his GPU comes from his environment).
func draKubeletPods(batch gpuIDs, claims draClaims) []*v1.PodResources {
	c, pod, with := podresourcestest.Container, podresourcestest.Pod, podresourcestest.WithClaims
	return []*v1.PodResources{
		pod("team-a", "resnet-0", with(c("trainer", ""), claims.alice.Resource())),
		pod("team-b", "notebook-bob", with(c("notebook", ""), claims.bob.Resource())),
		pod("team-c", "notebook-carol", with(c("notebook", ""), claims.carol.Resource())),
		pod("serving", "bert-0", with(c("server", ""), claims.dave.Resource())),
		pod("team-d", "sweep-3", c("worker", "")),
		pod("team-e", "waiting-0", c("waiting", gpuResource, batch[6].UUID)),
		pod("team-f", "odd-0", c("c", "")),
		pod("team-h", "infer-7", with(c("server", ""), claims.extended.Resource())),
		pod("kube-system", "coredns-0", c("coredns", "")),
	}
}

// draEnv starts the DRA node; adjust changes its host before it is written.
func draEnv(t *testing.T, adjust func(*hostfixture.Host, draClaims), opts ...envOption) *testEnv {
	t.Helper()
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	claims := newDRAClaims(t, readGPUs(batch)[3].migs[0])
	host := draHost(ids, claims)
	if adjust != nil {
		adjust(&host, claims)
	}
	kubelet := startKubelet(t, ids)
	kubelet.SetPods(draKubeletPods(ids, claims)...)
	return newTestEnv(t, host, kubelet, opts...)
}

// TestDRA: GPUs allocated through DRA are joined to their holders through the node's CDI specs
// and the NVIDIA driver's files, whatever the driver's device names say: a claim of two whole
// GPUs, a GPU shared by two claims (split by the holders' processes, as device-plugin replicas
// are), a MIG device, and the claim the scheduler made for a pod that asked for nvidia.com/gpu,
// each labeled with its claim; beside a device-plugin allocation and the environment.
func TestDRA(t *testing.T) {
	batch := gpuBatch(t, scenario)
	e := draEnv(t, nil)
	e.advance(5 * time.Minute) // erin's container, whose pod is gone, is a zombie
	e.refresh()
	out := e.process(batch)
	compareGolden(t, "dra", out)

	byJob := points(out, "job_name", "minor_number", "mig_uuid", "dra_claim_namespace", "dra_claim_name")
	util, mem := byJob["task_gpu_percent"], byJob["task_gpu_mem_percent"]
	device := deviceValues(batch)
	for _, gpu := range []string{"0", "1"} {
		assert.Equal(t, device[gpu].util, util["alice~resnet|"+gpu+"||team-a|resnet-gpus"].value, "a whole GPU of a claim of two: the device's utilization")
		assert.Equal(t, device[gpu].mem, mem["alice~resnet|"+gpu+"||team-a|resnet-gpus"].value)
	}
	bob, carol := util["bob~explore|2||team-b|bob-share"].value, util["team-c/notebook-carol|2||team-c|carol-share"].value
	assert.InDelta(t, device["2"].util*30/40, bob, 1e-9, "a device two claims share: bob's processes ran 30 of its 40 SM percent")
	assert.InDelta(t, device["2"].util, bob+carol, 1e-9, "the shares add up to the device")
	assert.InDelta(t, device["2"].mem*4000/16000, mem["bob~explore|2||team-b|bob-share"].value, 1e-9)
	assert.InDelta(t, 3000.0/19968*100, mem["dave~bert|3|"+readGPUs(batch)[3].migs[0].uuid+"|serving|bert-mig"].value, 1e-9, "a MIG device: its slice's memory")
	assert.Equal(t, 0.0, util["grace~queued|6|||"].value, "the device plugin's allocation, without claim labels")
	assert.Equal(t, device["7"].util, util["ivy~infer|7||team-h|infer-7-extended-resources-k7x2q"].value, "an extended resource served by DRA: the scheduler's claim")
	assert.Equal(t, device["5"].util, util["frank~sweep|5|||"].value, "NVIDIA_VISIBLE_DEVICES where the kubelet gives the GPU to nobody")
	assert.Len(t, util, 7, "no other holder: heidi's environment names GPU 7, which pod-resources decided")
	assert.Len(t, mem, 8)

	errs := points(out, "node_name", "source")["gpu_attribution_source_errors_total"]
	assert.Equal(t, 0.0, errs["gpu-node-07|dra"].value)
	assert.Empty(t, e.logs.FilterMessageSnippet("DRA devices").All())
}

// TestDRAUnjoined: a claimed device the node does not join to a GPU is counted once a refresh
// and logged once, and its GPU comes from the next source: never a wrong owner, never a holder
// given a missing one's share.
func TestDRAUnjoined(t *testing.T) {
	batch := gpuBatch(t, scenario)
	device := deviceValues(batch)
	t.Run("a claim's spec missing", func(t *testing.T) {
		e := draEnv(t, func(h *hostfixture.Host, claims draClaims) {
			file, _ := claims.carol.CDISpec()
			delete(h.CDISpecs, file)
		})
		out := e.process(batch)
		util := points(out, "job_name", "minor_number", "dra_claim_name")["task_gpu_percent"]
		assert.InDelta(t, device["2"].util*30/40, util["bob~explore|2|"].value, 1e-9,
			"the device bob shares with carol's unjoined claim: split by the processes, not all bob's")
		assert.InDelta(t, device["2"].util*10/40, util["team-c/notebook-carol|2|"].value, 1e-9)
		assert.NotContains(t, util, "bob~explore|2|bob-share")
		assert.Contains(t, util, "alice~resnet|0|resnet-gpus", "the other claims are joined")

		errs := func() float64 {
			return points(e.process(batch), "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value
		}
		before := errs()
		assert.Positive(t, before)
		e.refresh()
		assert.Equal(t, before+1, errs(), "one device, counted once a refresh")
		logs := e.logs.FilterMessageSnippet("DRA devices are not joined to GPUs")
		require.Equal(t, 1, logs.Len(), "logged once")
		assert.Equal(t, []any{"team-c/carol-share: gpu-5"}, logs.All()[0].ContextMap()["claimed_devices"])
	})
	t.Run("the driver's files missing", func(t *testing.T) {
		e := draEnv(t, func(h *hostfixture.Host, _ draClaims) { h.NvidiaGPUs = nil })
		out := e.process(batch)
		byJob := points(out, "job_name", "minor_number", "mig_uuid", "dra_claim_name")
		util := byJob["task_gpu_percent"]
		assert.Equal(t, device["0"].util, util["alice~resnet|0||"].value, "the processes say who is on the GPU")
		assert.Contains(t, byJob["task_gpu_mem_percent"], "dave~bert|3||", "the MIG job's process: on its GPU, not on its slice")
		assert.Equal(t, 0.0, util["grace~queued|6||"].value, "the device plugin's allocation stands")
		assert.NotContains(t, util, "ivy~infer|7||", "an idle DRA holder is known to the join only")
		e.refresh()
		before := points(e.process(batch), "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value
		e.refresh()
		after := points(e.process(batch), "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value
		assert.Equal(t, 6.0, after-before, "alice's two devices, bob's, carol's, dave's and ivy's")
	})
	t.Run("a holder not found yet", func(t *testing.T) {
		// carol's container has no log link yet: her claim is joined, but to nobody the node
		// knows. The kubelet decides the GPU she shares with bob, and one of its holders is not
		// found (as one in crash back-off is not): nobody holds it until she is, rather than bob
		// all of it or the processes' guess.
		e := draEnv(t, func(h *hostfixture.Host, _ draClaims) { h.Pods[shareB-1].Containers[0].Pod = nil })
		util := points(e.process(batch), "job_name", "minor_number", "dra_claim_name")["task_gpu_percent"]
		for key := range util {
			assert.NotRegexp(t, `\|2\|`, key, "nobody on the GPU")
		}
		assert.Contains(t, util, "alice~resnet|0|resnet-gpus")
		assert.Equal(t, 0.0, points(e.process(batch), "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value,
			"a joined claim is no error")
	})
	t.Run("a finished pod's claim", func(t *testing.T) {
		// The kubelet still lists a pod whose containers ended and whose claim the driver
		// unprepared (its spec removed): nothing runs that needs the join.
		e := draEnv(t, nil)
		ids := idsOf(batch)
		claims := newDRAClaims(t, readGPUs(batch)[3].migs[0])
		done := podresourcestest.NvidiaClaim{
			UID: "d0e00000-0000-4000-8000-000000000099", Namespace: "team-z", Name: "old-gpu", Pool: "gpu-node-07",
			Devices: []podresourcestest.NvidiaDevice{{Minor: devMinor(4)}},
		}
		e.kubelet.SetPods(append(draKubeletPods(ids, claims),
			podresourcestest.Pod("team-z", "old-0", podresourcestest.WithClaims(podresourcestest.Container("main", ""), done.Resource())))...)
		e.attr.node.kubelet.Refresh()
		e.refresh()
		assert.Equal(t, 0.0, points(e.process(batch), "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value)
		assert.Empty(t, e.logs.FilterMessageSnippet("DRA devices").All())
	})
	t.Run("no DRA driver configured", func(t *testing.T) {
		e := draEnv(t, nil, func(cfg *Config) { cfg.PodResources.Drivers = nil })
		out := e.process(batch)
		util := points(out, "job_name", "minor_number", "dra_claim_name")["task_gpu_percent"]
		assert.Contains(t, util, "alice~resnet|0|", "the processes decide")
		assert.NotContains(t, util, "ivy~infer|7|")
		assert.Equal(t, 0.0, points(out, "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|dra"].value)
	})
}

// TestJoinCDIDevices: what a CDI device's nodes say, and what they cannot.
func TestJoinCDIDevices(t *testing.T) {
	capNode := func(gpu, gi, ci int) string {
		return fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", hostfixture.MIGCapMinor(gpu, gi, ci))
	}
	root := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfixture.Write(root, hostfixture.Host{CgroupVersion: 2, NvidiaGPUs: []hostfixture.NvidiaGPU{
		{BusID: "0000:07:00.0", Minor: 0, UUID: "GPU-a"}, {BusID: "0000:0f:00.0", Minor: 1, UUID: "GPU-b"},
	}}))
	driver, err := readNvidiaDriver(root)
	require.NoError(t, err)
	g := &gpuDevices{driver: driver, cdi: cdi.Devices{
		"v/c=gpu":     {"/dev/nvidia1", "/dev/dri/card2", "/dev/dri/renderD129"},
		"v/c=two":     {"/dev/nvidia0", "/dev/nvidia1"},
		"v/c=mig":     {"/dev/nvidia1", capNode(1, 2, -1), capNode(1, 2, 0)},
		"v/c=gi":      {"/dev/nvidia1", capNode(1, 2, -1)},
		"v/c=nocap":   {"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap99999"},
		"v/c=nominor": {"/dev/nvidia5"},
		"v/c=none":    {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/infiniband/uverbs0"},
	}}
	for name, want := range map[string][]string{
		"v/c=gpu": {"GPU-b"},
		"v/c=two": {"GPU-a", "GPU-b"},
		"v/c=mig": {migID("GPU-b", "2", "0")},
	} {
		got, ok := g.cdiDevice(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"v/c=gi", "v/c=nocap", "v/c=nominor", "v/c=none", "v/c=absent"} {
		_, ok := g.cdiDevice(name)
		assert.False(t, ok, "%s is joined to no GPU, not guessed", name)
	}

	dev := func(cdiDevices ...string) podresources.ClaimDevice {
		return podresources.ClaimDevice{Driver: "gpu.nvidia.com", Pool: "n", Device: "d", CDIDevices: cdiDevices}
	}
	got, ok := g.claimDevice(dev("v/c=gpu", "v/c=two"))
	assert.True(t, ok)
	assert.Equal(t, []string{"GPU-b", "GPU-a"}, got, "the GPUs of every CDI device the kubelet lists with it, once each")
	_, ok = g.claimDevice(dev("v/c=gpu", "v/c=absent"))
	assert.False(t, ok, "one unjoined CDI device leaves the device unknown")
	_, ok = g.claimDevice(dev())
	assert.False(t, ok, "a device without CDI devices")
	_, ok = (*gpuDevices)(nil).claimDevice(dev("v/c=gpu"))
	assert.False(t, ok, "nothing read")
}

// TestReadNvidiaDriver: the driver's files as a 550 driver writes them; a GPU whose file is
// damaged is named and the others read.
func TestReadNvidiaDriver(t *testing.T) {
	root := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfixture.Write(root, hostfixture.Host{CgroupVersion: 2, NvidiaGPUs: []hostfixture.NvidiaGPU{
		{BusID: "0000:07:00.0", Minor: 3, UUID: "GPU-a"}, {BusID: "0000:0f:00.0", Minor: 0, UUID: "GPU-b"},
	}}))
	d, err := readNvidiaDriver(root)
	require.NoError(t, err)
	assert.Equal(t, map[int]string{3: "GPU-a", 0: "GPU-b"}, d.uuids)
	assert.Equal(t, migCap{gpu: 3, gi: 2, ci: 1}, d.migCaps[hostfixture.MIGCapMinor(3, 2, 1)])
	assert.Equal(t, migCap{gpu: 0, gi: 14, ci: -1}, d.migCaps[hostfixture.MIGCapMinor(0, 14, -1)])
	assert.Len(t, d.migCaps, 2*135, "config and monitor name no instance")

	require.NoError(t, os.WriteFile(filepath.Join(root, gpusDir, "0000:07:00.0", "information"), []byte("Model: x\n"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(root, migMinorsFile)))
	d, err = readNvidiaDriver(root)
	assert.EqualError(t, err, "/proc/driver/nvidia/gpus/0000:07:00.0/information: no GPU UUID and device minor")
	assert.Equal(t, map[int]string{0: "GPU-b"}, d.uuids)
	assert.Empty(t, d.migCaps, "a driver without MIG")
}

func FuzzParseInformation(f *testing.F) {
	for _, s := range []string{
		"Model: \t\t NVIDIA A100-SXM4-40GB\nGPU UUID: \t GPU-6e9f8cb2-6761-bd29-f75d-b5db1987e014\nDevice Minor: \t 3\nGPU Excluded:\t No\n",
		"GPU UUID: GPU-a\nDevice Minor: -1\n", "Device Minor: 99999999999999999999\n", "GPU UUID:\n", "::::\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		minor, uuid, err := parseInformation(data)
		if err == nil && (minor < 0 || len(uuid) <= len("GPU-") || uuid[:4] != "GPU-") {
			t.Fatalf("minor %d, uuid %q accepted", minor, uuid)
		}
	})
}

func FuzzParseMIGMinors(f *testing.F) {
	for _, s := range []string{
		"config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n",
		"gpu1/gi14/ci7/access 273\n", "gpu/gi/access 5\n", "gpu0/gi0/ci0/ci0/access 4\n", "gpu0/gi0/access -4\n", "gpu+1/gi0/access 4\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for minor, c := range parseMIGMinors(data) {
			if minor < 0 || c.gpu < 0 || c.gi < 0 || c.ci < -1 {
				t.Fatalf("%d: %+v accepted", minor, c)
			}
		}
	})
}

// TestDRASharesOneRefresh: the join is read in the node's refresh, not in a batch: batches do no
// I/O, and a spec written after the refresh is only read at the next one.
func TestDRASharesOneRefresh(t *testing.T) {
	batch := gpuBatch(t, scenario)
	var file, spec string
	e := draEnv(t, func(h *hostfixture.Host, claims draClaims) {
		file, spec = claims.carol.CDISpec()
		delete(h.CDISpecs, file)
	})
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "run/cdi", file), []byte(spec), 0o600))
	const carol = "team-c/notebook-carol|carol-share"
	assert.NotContains(t, points(e.process(batch), "job_name", "dra_claim_name")["task_gpu_percent"], carol, "not before the next refresh")
	e.refresh()
	assert.Contains(t, points(e.process(batch), "job_name", "dra_claim_name")["task_gpu_percent"], carol)
	assert.Equal(t, 1, e.logs.FilterMessageSnippet("DRA devices are joined to GPUs again").Len())
}
