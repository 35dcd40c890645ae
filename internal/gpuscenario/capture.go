// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"cmp"
	"fmt"
	"os"
)

// CapturedGPU is one GPU of a real node's capture: what identifies it and the values that do
// not change while it runs. A zero value is one the capture does not have ("N/A"): the
// profile's stands.
type CapturedGPU struct {
	// Model is the product name (NVIDIA); empty on AMD, whose KFD topology has none.
	Model string
	// UUID is the GPU's NVML UUID (NVIDIA); empty on AMD, whose identity is UniqueID.
	UUID string
	// PCI is the GPU's PCI address.
	PCI PCIAddress
	// PCIDeviceID is NVML's pci_device_id, device<<16 | vendor (NVIDIA: 0x20B210DE), or the
	// PCI device id (AMD: 0x74a1).
	PCIDeviceID uint32
	// MemoryMiB is the framebuffer (NVIDIA).
	MemoryMiB uint64
	// MaxSMClockMHz and MaxMemClockMHz are the highest clocks (NVIDIA).
	MaxSMClockMHz, MaxMemClockMHz uint32
	// PowerMinW and PowerMaxW are the range the power limit can be set in (NVIDIA).
	PowerMinW, PowerMaxW uint32
	// UniqueID is the GPU's unique_id (AMD; 0: none); Partitions its compute partitions, one
	// KFD node each (AMD).
	UniqueID   uint64
	Partitions int
}

// PCIAddress is a PCI function's address.
type PCIAddress struct {
	Domain                uint32
	Bus, Device, Function uint8
}

// String is the address in the kernel's form, 0000:c1:00.0.
func (a PCIAddress) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// compare orders addresses as the PCI bus enumerates them.
func (a PCIAddress) compare(b PCIAddress) int {
	return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Bus, b.Bus), cmp.Compare(a.Device, b.Device), cmp.Compare(a.Function, b.Function))
}

// readCapture reads a vendor's capture: an nvidia-smi -q -x dump (a file) for NVIDIA, a KFD
// topology (a directory holding nodes/) for AMD.
func readCapture(v Vendor, path string) ([]CapturedGPU, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case v == NVIDIA && !info.IsDir():
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return ParseNvidiaSMI(data)
	case v == AMD && info.IsDir():
		return ReadKFDTopology(path)
	case v == NVIDIA:
		return nil, fmt.Errorf("%s is a directory; an NVIDIA profile takes an nvidia-smi -q -x dump", path)
	default:
		return nil, fmt.Errorf("%s is a file; an AMD profile takes a KFD topology directory (a copy of /sys/class/kfd/kfd/topology)", path)
	}
}
