// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package amdgpu_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
)

const topology = "sys/class/kfd/kfd/topology/nodes"

// checkPartitions asserts that the devices are n's GPUs in PCI address order, each as its
// partitions in order, with the KFD gpu_ids and amdgpu_xcp devices the fixture gave them, and
// that every process's VRAM file names one of them.
func checkPartitions(t *testing.T, root string, n amdgpufixture.Node, devices []amdgpu.Device) {
	t.Helper()
	byGPUID := map[uint32]amdgpu.Device{}
	for _, d := range devices {
		byGPUID[d.GPUID] = d
	}
	want := 0
	xcp := 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		parts := max(1, g.Partitions)
		want += parts
		for p := range parts {
			d, ok := byGPUID[g.GPUID+uint32(p)]
			if !assert.True(t, ok, "%s partition %d", g.PCIAddress, p) {
				continue
			}
			assert.Equal(t, g.PCIAddress, d.PCIAddress)
			assert.Equal(t, p, d.Partition)
			assert.Equal(t, parts, d.Partitions)
			assert.Equal(t, g.UniqueID, d.KFDUniqueID)
			switch {
			case parts == 1:
				assert.Empty(t, d.PartitionDevice)
			case p == 0:
				assert.Equal(t, g.PCIAddress, d.PartitionDevice)
			default:
				assert.Equal(t, "amdgpu_xcp_"+strconv.Itoa(xcp+p-1), d.PartitionDevice)
			}
		}
		xcp += 7
	}
	assert.Len(t, devices, want)
	vram, errs := amdgpu.Reader{Root: root}.ProcessVRAM()
	require.Empty(t, errs)
	for _, p := range n.Processes {
		id := n.GPUs[p.GPU].GPUID + uint32(p.Partition)
		assert.Contains(t, byGPUID, id, "process %d's GPU", p.PID)
		assert.Equal(t, p.VRAMBytes, vram[id][p.PID])
	}
}

// TestPartitionModes reads nodes of 8 GPUs in each partition mode, laid out as the kernel lays
// them out (each partition its own KFD node, its index ORed into location_id): every
// partition is a device, with its processes' VRAM.
func TestPartitionModes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		node    amdgpufixture.Node
		devices int
	}{
		{"mi300x-spx", amdgpufixture.MI300XPartitioned(8, 1), 8},
		{"mi300x-dpx", amdgpufixture.MI300XPartitioned(8, 2), 16},
		{"mi300x-qpx", amdgpufixture.MI300XPartitioned(8, 4), 32},
		{"mi300x-cpx", amdgpufixture.MI300XPartitioned(8, 8), 64},
		{"mi308x-spx", amdgpufixture.MI308XPartitioned(1), 8},
		{"mi308x-dpx", amdgpufixture.MI308XPartitioned(2), 16},
		{"mi308x-cpx", amdgpufixture.MI308XPartitioned(4), 32},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, amdgpufixture.Write(root, tt.node))
			devices, errs := amdgpu.Reader{Root: root}.Devices()
			require.Empty(t, errs)
			require.Len(t, devices, tt.devices)
			checkPartitions(t, root, tt.node, devices)
		})
	}
}

// withCapturedTopology writes n's GPUs with the fixture, then replaces the KFD topology it
// wrote with a captured one (testdata/kfd/SOURCE.md). A captured node without a gpu_id file
// gets one: its node number, plus 1000 (gpu_id only has to be unique and not 0).
func withCapturedTopology(t *testing.T, n amdgpufixture.Node, capture string) string {
	t.Helper()
	root := t.TempDir()
	n.Processes = nil
	require.NoError(t, amdgpufixture.Write(root, n))
	dst := filepath.Join(root, topology)
	require.NoError(t, os.RemoveAll(dst))
	require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join("testdata", "kfd", capture, "nodes"))))
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	for _, e := range entries {
		id := filepath.Join(dst, e.Name(), "gpu_id")
		if _, err := os.Stat(id); errors.Is(err, os.ErrNotExist) {
			number, err := strconv.Atoi(e.Name())
			require.NoError(t, err)
			gpuID := 0
			if b, err := os.ReadFile(filepath.Join(dst, e.Name(), "properties")); err == nil && !regexp.MustCompile(`(?m)^simd_count 0$`).Match(b) {
				gpuID = 1000 + number
			}
			require.NoError(t, os.WriteFile(id, []byte(strconv.Itoa(gpuID)+"\n"), 0o600))
		}
	}
	return root
}

// TestCapturedMI308XCPX reads the KFD topology of a real node of 8 MI308X in CPX mode: 32
// partitions, each joined to its GPU (by domain, location_id and unique_id; two PCI domains).
func TestCapturedMI308XCPX(t *testing.T) {
	n := amdgpufixture.MI308XPartitioned(4)
	root := withCapturedTopology(t, n, "mi308x-cpx")
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	require.Len(t, devices, 32)
	// The captured gpu_ids of 0000:0a:00.0's partitions (nodes 2 to 5) and of 0001:c9:00.0's
	// (nodes 30 to 33).
	for i, id := range []uint32{24248, 41657, 59065, 2236} {
		assert.Equal(t, amdgpu.Device{
			PCIAddress: "0000:0a:00.0", DeviceDir: devices[i].DeviceDir, Physical: 0, Partition: i, Partitions: 4,
			PartitionDevice: []string{"0000:0a:00.0", "amdgpu_xcp_0", "amdgpu_xcp_1", "amdgpu_xcp_2"}[i],
			GPUID:           id, KFDUniqueID: 598046273873802902,
		}, devices[i])
	}
	for i, id := range []uint32{27381, 38644, 54004, 15601} {
		d := devices[28+i]
		assert.Equal(t, "0001:c9:00.0", d.PCIAddress)
		assert.Equal(t, i, d.Partition)
		assert.Equal(t, id, d.GPUID)
	}
	for i, d := range devices {
		assert.Equal(t, n.GPUs[i/4].PCIAddress, d.PCIAddress, "device %d", i)
		assert.Equal(t, n.GPUs[i/4].UniqueID, d.KFDUniqueID, "device %d", i)
	}
}

// TestCapturedMI300XCPX reads the KFD topology of a real node of 8 MI300X in CPX mode; the
// capture lacks the last GPU's eighth partition, so 63 partitions.
func TestCapturedMI300XCPX(t *testing.T) {
	buses := []int{0x05, 0x27, 0x47, 0x65, 0x85, 0xa7, 0xc7, 0xe5}
	uniqueIDs := []uint64{16404946649897475633, 2472748907779728154, 15565237874008425757, 12035684874187068538, 15304831566906821053, 13644590235195043050, 13326531576914550249, 15931900197903628278}
	n := amdgpufixture.MI300XCPX(8)
	for i := range n.GPUs {
		n.GPUs[i].PCIAddress = fmt.Sprintf("0000:%02x:00.0", buses[i])
		n.GPUs[i].UniqueID = uniqueIDs[i]
	}
	root := withCapturedTopology(t, n, "mi300x-cpx")
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	require.Len(t, devices, 63)
	for i, d := range devices {
		g, p := i/8, i%8
		assert.Equal(t, n.GPUs[g].PCIAddress, d.PCIAddress, "device %d", i)
		assert.Equal(t, p, d.Partition, "device %d", i)
		assert.Equal(t, uint32(1000+2+i), d.GPUID, "device %d: node %d", i, 2+i)
		assert.Equal(t, min(8, 63-8*g), d.Partitions, "device %d", i)
		if p > 0 {
			assert.Equal(t, "amdgpu_xcp_"+strconv.Itoa(7*g+p-1), d.PartitionDevice, "device %d", i)
		}
	}
}

// rewriteLocation sets location_id in KFD node node's properties to value.
func rewriteLocation(t *testing.T, root string, node int, value uint64) {
	t.Helper()
	path := filepath.Join(root, topology, strconv.Itoa(node), "properties")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^location_id \d+$`)
	require.True(t, re.Match(b), "%s has a location_id", path)
	require.NoError(t, os.WriteFile(path, re.ReplaceAll(b, []byte("location_id "+strconv.FormatUint(value, 10))), 0o600))
}

// TestUnjoinedKFDNode: a KFD node whose location_id names no amdgpu card is an error naming it,
// and the other devices are all there.
func TestUnjoinedKFDNode(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, amdgpufixture.MI300X()))
	rewriteLocation(t, root, 3, 0x3300) // node 3 is GPU 1 (2 CPU nodes first)
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Len(t, errs, 1)
	var re amdgpu.ReadError
	require.ErrorAs(t, errs[0], &re)
	assert.Equal(t, amdgpu.SourceKFD, re.Source)
	assert.Equal(t, filepath.Join(root, topology, "3", "properties"), re.Path)
	var unjoined amdgpu.UnjoinedKFDNodeError
	require.ErrorAs(t, errs[0], &unjoined)
	assert.Equal(t, uint32(0x3300), unjoined.LocationID)
	assert.Len(t, devices, 8, "the GPU is there; only its KFD node is not joined")
	assert.Zero(t, devices[1].GPUID)
}

// TestPartitionBitsNamingAnotherGPU: a partition's location_id can be the PCI address of
// another amdgpu device (0000:05:00.1 here); unique_id tells them apart.
func TestPartitionBitsNamingAnotherGPU(t *testing.T) {
	n := amdgpufixture.MI300XPartitioned(1, 2)
	other := amdgpufixture.MI300XGPU(1, 0)
	other.PCIAddress = "0000:05:00.1"
	n.GPUs = append(n.GPUs, other)
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, n))
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	require.Len(t, devices, 3)
	assert.Equal(t, []uint32{n.GPUs[0].GPUID, n.GPUs[0].GPUID + 1, other.GPUID}, []uint32{devices[0].GPUID, devices[1].GPUID, devices[2].GPUID})
	assert.Equal(t, "0000:05:00.0", devices[1].PCIAddress)
	assert.Equal(t, 1, devices[1].Partition)
	assert.Equal(t, "0000:05:00.1", devices[2].PCIAddress)
	assert.Equal(t, 1, devices[2].Partitions)
}

// TestPartitionInHighBits reads the numbering of a variant that was merged and reverted
// (node_id in location_id's bits 31:28): a location_id beyond 16 bits is read, not rejected.
func TestPartitionInHighBits(t *testing.T) {
	n := amdgpufixture.MI300XPartitioned(2, 2)
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, n))
	rewriteLocation(t, root, 3, 1<<28|0x0500)
	rewriteLocation(t, root, 5, 1<<28|0x1500)
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	checkPartitions(t, root, n, devices)
}

// TestCapturedMI210 reads the KFD topology of a real node of 8 whole MI210s: each node joins
// its GPU at its location_id as it is.
func TestCapturedMI210(t *testing.T) {
	// The GPUs in the capture's node order (nodes 2 to 9), by location_id and unique_id.
	locations := []int{25344, 17152, 768, 9728, 58112, 49920, 33536, 41728}
	uniqueIDs := []uint64{1801979520617338022, 5847760019078012339, 10645161697164847644, 4847253685048710349, 12585367064092601175, 11779194899033552202, 17888023871577450191, 14073402507705256557}
	var n amdgpufixture.Node
	for i, loc := range locations {
		g := amdgpufixture.MI250XGCD(i, 0)
		g.PCIAddress = fmt.Sprintf("0000:%02x:%02x.%x", loc>>8, loc>>3&0x1f, loc&7)
		g.UniqueID = uniqueIDs[i]
		n.GPUs = append(n.GPUs, g)
	}
	root := withCapturedTopology(t, n, "mi210-xgmi")
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	require.Len(t, devices, 8)
	for _, d := range devices {
		i := slices.IndexFunc(n.GPUs, func(g amdgpufixture.GPU) bool { return g.PCIAddress == d.PCIAddress })
		require.GreaterOrEqual(t, i, 0, d.PCIAddress)
		assert.Equal(t, 1, d.Partitions)
		assert.Equal(t, uint32(1000+2+i), d.GPUID, "%s is node %d", d.PCIAddress, 2+i)
		assert.Equal(t, uniqueIDs[i], d.KFDUniqueID)
	}
	assert.Equal(t, "0000:03:00.0", devices[0].PCIAddress, "PCI address order")
}

// TestPartitionsSharingALocation: where the kernel gives a GPU's partitions one location_id
// (nothing ORed in), they are still joined, in render-node order.
func TestPartitionsSharingALocation(t *testing.T) {
	n := amdgpufixture.MI300XPartitioned(2, 4)
	root := t.TempDir()
	require.NoError(t, amdgpufixture.Write(root, n))
	for node := 3; node <= 5; node++ { // GPU 0's partitions 1 to 3 (2 CPU nodes first)
		rewriteLocation(t, root, node, 0x0500)
	}
	devices, errs := amdgpu.Reader{Root: root}.Devices()
	require.Empty(t, errs)
	checkPartitions(t, root, n, devices)
}
