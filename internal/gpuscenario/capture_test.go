// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readNvidiaSMI(t *testing.T, name string) ([]CapturedGPU, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "nvidia-smi", name))
	require.NoError(t, err)
	return ParseNvidiaSMI(data)
}

// TestParseNvidiaSMICaptures reads the real dumps of testdata/nvidia-smi (SOURCE.md there).
func TestParseNvidiaSMICaptures(t *testing.T) {
	k80, err := readNvidiaSMI(t, "openpai-out_of_order.xml")
	require.NoError(t, err)
	require.Len(t, k80, 4)
	assert.Equal(t, CapturedGPU{
		Model: "Tesla K80", UUID: "GPU-c3b26f7a-8dcb-619c-fa1b-8029265a4db0",
		PCI: PCIAddress{Domain: 0x1580}, PCIDeviceID: 0x102D10DE, MemoryMiB: 11441,
		MaxSMClockMHz: 875, MaxMemClockMHz: 2505, PowerMinW: 100, PowerMaxW: 175,
	}, k80[0])
	assert.Equal(t, PCIAddress{Domain: 0xF8D6}, k80[3].PCI, "Azure's 32-bit PCI domains")
	assert.Equal(t, "f8d6:00:00.0", k80[3].PCI.String())

	gtx, err := readNvidiaSMI(t, "openpai-sample.xml")
	require.NoError(t, err)
	require.Len(t, gtx, 2, "the gpu elements, not attached_gpus (6)")
	assert.Equal(t, CapturedGPU{
		Model: "GeForce GTX 1070", UUID: "GPU-28daffaf-8abe-aaf8-c298-4bd13aecb5e6",
		PCI: PCIAddress{Bus: 3}, PCIDeviceID: 0x1B8110DE, MemoryMiB: 8114,
		MaxSMClockMHz: 1961, MaxMemClockMHz: 4004, PowerMinW: 90, PowerMaxW: 200,
	}, gtx[1])

	rtx, err := readNvidiaSMI(t, "openpai-sample_ecc_unsupported.xml")
	require.NoError(t, err)
	require.Len(t, rtx, 2)
	assert.Equal(t, "GeForce RTX 2080 Ti", rtx[0].Model)
	assert.Equal(t, uint32(280), rtx[0].PowerMaxW)

	// Driver 535's layout: gpu_power_readings.
	a100, err := readNvidiaSMI(t, "checkmk-a100-sxm4-80gb.xml")
	require.NoError(t, err)
	assert.Equal(t, []CapturedGPU{{
		Model: "NVIDIA A100-SXM4-80GB", UUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298",
		PCI: PCIAddress{Bus: 1}, PCIDeviceID: 0x20B210DE, MemoryMiB: 81920,
		MaxSMClockMHz: 1410, MaxMemClockMHz: 1593, PowerMinW: 100, PowerMaxW: 500,
	}}, a100)

	// A GPU the driver reports little of: what is missing is named.
	_, err = readNvidiaSMI(t, "openpai-outdated_gpu.xml")
	require.EqualError(t, err, `gpu[0].pci.pci_bus_id: want <domain>:<bus>:<device>.<function>, got ""
gpu[0].fb_memory_usage.total: missing`)
}

// smiDump is a dump of one GPU with the given elements inside its gpu element.
func smiDump(inner string) []byte {
	return []byte(`<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><gpu id="00000000:07:00.0">` + inner + `</gpu></nvidia_smi_log>`)
}

const smiIdentity = `<product_name>NVIDIA H100 80GB HBM3</product_name><uuid>GPU-1</uuid>
<pci><pci_bus_id>00000000:07:00.0</pci_bus_id><pci_device_id>233010DE</pci_device_id></pci>
<fb_memory_usage><total>81559 MiB</total></fb_memory_usage>`

// TestParseNvidiaSMILayouts: drivers from 530 on print gpu_power_readings (nvsmi_device_v12);
// N/A keeps the profile's value.
func TestParseNvidiaSMILayouts(t *testing.T) {
	gpus, err := ParseNvidiaSMI(smiDump(smiIdentity + `<max_clocks><sm_clock>1980 MHz</sm_clock><mem_clock>N/A</mem_clock></max_clocks>
<gpu_power_readings><min_power_limit>200.00 W</min_power_limit><max_power_limit>700.00 W</max_power_limit></gpu_power_readings>`))
	require.NoError(t, err)
	assert.Equal(t, CapturedGPU{
		Model: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", PCI: PCIAddress{Bus: 7}, PCIDeviceID: 0x233010DE,
		MemoryMiB: 81559, MaxSMClockMHz: 1980, PowerMinW: 200, PowerMaxW: 700,
	}, gpus[0])
}

func TestParseNvidiaSMIErrors(t *testing.T) {
	for dump, want := range map[string]string{
		"not xml":           "nvidia_smi_log: EOF",
		"<nvidia_smi_log/>": "nvidia_smi_log: want 1 to 64 gpu elements, got 0",
		"<other/>":          "nvidia_smi_log: expected element type <nvidia_smi_log> but have <other>",
		string(smiDump(`<product_name>N/A</product_name><uuid>x</uuid><pci><pci_bus_id>1:2:3</pci_bus_id><pci_device_id>zz</pci_device_id></pci><fb_memory_usage><total>80 GiB</total></fb_memory_usage>`)): `gpu[0].product_name: missing
gpu[0].uuid: want GPU-…, got "x"
gpu[0].pci.pci_bus_id: want <domain>:<bus>:<device>.<function>, got "1:2:3"
gpu[0].pci.pci_device_id: want 8 hex digits, got "zz"
gpu[0].fb_memory_usage.total: want a number of MiB below 1073741824, got "80 GiB"`,
		string(smiDump(smiIdentity + `<max_clocks><sm_clock>-1 MHz</sm_clock></max_clocks><power_readings><min_power_limit>300.00 W</min_power_limit><max_power_limit>250.00 W</max_power_limit></power_readings>`)): `gpu[0].max_clocks.sm_clock: want a number of MHz below 100000, got "-1 MHz"
gpu[0].power_readings: min_power_limit 300 W is above max_power_limit 250 W`,
		"<nvidia_smi_log><gpu>" + smiIdentity + "</gpu><gpu>" + smiIdentity + "</gpu></nvidia_smi_log>": "gpu[1].uuid: GPU-1 is gpu[0]'s too",
	} {
		_, err := ParseNvidiaSMI([]byte(dump))
		assert.EqualError(t, err, want, dump)
	}
}

// TestReadKFDTopologyCaptures reads the real KFD topologies of internal/amdgpu/testdata/kfd
// (SOURCE.md there).
func TestReadKFDTopologyCaptures(t *testing.T) {
	kfd := filepath.Join("..", "amdgpu", "testdata", "kfd")
	mi308x, err := ReadKFDTopology(filepath.Join(kfd, "mi308x-cpx"))
	require.NoError(t, err)
	require.Len(t, mi308x, 8, "32 partition nodes of 8 GPUs")
	assert.Equal(t, CapturedGPU{PCI: PCIAddress{Bus: 0x0a}, PCIDeviceID: 0x74a2, UniqueID: 598046273873802902, Partitions: 4}, mi308x[0])
	assert.Equal(t, "0001:0b:00.0", mi308x[4].PCI.String(), "the second PCI domain")

	mi210, err := ReadKFDTopology(filepath.Join(kfd, "mi210-xgmi"))
	require.NoError(t, err)
	require.Len(t, mi210, 8)
	assert.Equal(t, CapturedGPU{PCI: PCIAddress{Bus: 0x03}, PCIDeviceID: 0x740f, UniqueID: 10645161697164847644, Partitions: 1}, mi210[0], "in PCI address order, not node order")

	vega, err := ReadKFDTopology(filepath.Join(kfd, "vega10-no-domain"))
	require.NoError(t, err)
	assert.Equal(t, []CapturedGPU{{PCI: PCIAddress{Bus: 0x19}, PCIDeviceID: 0x6860, UniqueID: 14073402507705256556, Partitions: 1}}, vega)

	// The capture has 7 of its last GPU's 8 CPX partitions: not a node the driver makes.
	_, err = ReadKFDTopology(filepath.Join(kfd, "mi300x-cpx"))
	require.ErrorContains(t, err, "GPU 0000:e5:00.0: 7 partitions; the driver makes 1, 2, 4 or 8 (is the capture whole?)")
}

func TestReadKFDTopologyErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadKFDTopology(dir)
	require.ErrorContains(t, err, "nodes: no such file or directory")

	node := filepath.Join(dir, "nodes", "1")
	require.NoError(t, os.MkdirAll(node, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(node, "properties"), []byte("simd_count 8\nlocation_id x\n"), 0o600))
	_, err = ReadKFDTopology(dir)
	require.ErrorContains(t, err, "nodes/1/properties: location_id:")

	require.NoError(t, os.WriteFile(filepath.Join(node, "properties"), []byte("simd_count 0\nlocation_id 0\ndrm_render_minor 0\n"), 0o600))
	_, err = ReadKFDTopology(dir)
	require.ErrorContains(t, err, "want 1 to 64 GPU nodes, got 0")
}

// TestCaptureInScenario: a scenario's capture gives its GPUs and their identities; the
// scenario's own keys must agree with it.
func TestCaptureInScenario(t *testing.T) {
	sc, err := Load(filepath.Join("testdata", "replay-k80.yaml"))
	require.NoError(t, err)
	assert.Equal(t, 4, sc.GPUs)
	assert.Equal(t, "GPU-3341aba2-f01d-2c1f-7dd4-e389779faec2", sc.UUID(3))
	assert.Equal(t, PCIAddress{Domain: 0x2DF7}, sc.PCIAddress(1))

	sc, err = Load(filepath.Join("testdata", "replay-mi308x.yaml"))
	require.NoError(t, err)
	assert.Equal(t, AMD, sc.Vendor())
	assert.Equal(t, 8, sc.GPUs)

	for body, want := range map[string]string{
		"profile: dgxa100\ncapture: nvidia-smi/openpai-sample.xml\ngpus: 8\n":                            "gpus: 8, but the capture has 2; leave gpus out",
		"profile: dgxa100\ncapture: nvidia-smi/openpai-sample.xml\nmodel: A100\n":                        "capture: the capture gives the model and memory; remove model and memory_mib",
		"profile: dgxa100\ncapture: nvidia-smi/openpai-sample.xml\nfaults: [{gpu: 2, kind: gpu_lost}]\n": "faults[0].gpu: 2 is not a device (the node has 2)",
		"profile: dgxa100\ncapture: nvidia-smi\n":                                                        "capture: nvidia-smi is a directory; an NVIDIA profile takes an nvidia-smi -q -x dump",
		"profile: mi300x\ncapture: nvidia-smi/openpai-sample.xml\n":                                      "capture: nvidia-smi/openpai-sample.xml is a file; an AMD profile takes a KFD topology directory",
		"profile: dgxa100\ncapture: nvidia-smi/openpai-outdated_gpu.xml\n":                               "capture: gpu[0].pci.pci_bus_id: want",
		"profile: dgxa100\ncapture: missing.xml\n":                                                       "capture: stat missing.xml: no such file or directory",
	} {
		_, err := Parse([]byte(body), "testdata")
		require.Error(t, err, body)
		assert.Contains(t, strings.ReplaceAll(err.Error(), "testdata/", ""), want, body)
	}
}
