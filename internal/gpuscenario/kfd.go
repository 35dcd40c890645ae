// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
)

// partitionBits are the low bits of a partition's location_id that carry its index
// (kfd_topology_add_device ORs it in; partition 0's is the GPU's own pci_dev_id).
const partitionBits = 0x7

// ReadKFDTopology reads the GPUs of a KFD topology (a copy of /sys/class/kfd/kfd/topology:
// nodes/<n>/properties), in PCI address order: the order the amdgpu backend numbers them, so
// that a scenario's GPU N is the backend's minor_number N. CPU nodes (no SIMDs) are left out; a partitioned GPU's
// nodes, which share its unique_id and PCI address, are one GPU with one partition each.
// Errors name the node's file.
func ReadKFDTopology(dir string) ([]CapturedGPU, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "nodes"))
	if err != nil {
		return nil, err
	}
	var nodes []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	var gpus []CapturedGPU
	var errs []error
	for _, n := range nodes {
		rel := filepath.Join("nodes", strconv.Itoa(n), "properties")
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p, err := amdgpu.ParseKFDProperties(string(data))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
			continue
		}
		if p.SIMDCount == 0 {
			continue // a CPU node
		}
		devID := p.LocationID &^ partitionBits
		address := PCIAddress{Domain: p.Domain, Bus: uint8(devID >> 8), Device: uint8(devID >> 3 & 0x1f)}
		if last := len(gpus) - 1; last >= 0 && p.UniqueID != 0 && gpus[last].UniqueID == p.UniqueID && gpus[last].PCI == address {
			gpus[last].Partitions++
			continue
		}
		gpus = append(gpus, CapturedGPU{PCI: address, PCIDeviceID: uint32(p.DeviceID), UniqueID: p.UniqueID, Partitions: 1})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(gpus) == 0 || len(gpus) > maxCapturedGPUs {
		return nil, fmt.Errorf("%s: want 1 to %d GPU nodes, got %d", dir, maxCapturedGPUs, len(gpus))
	}
	slices.SortFunc(gpus, func(a, b CapturedGPU) int { return a.PCI.compare(b.PCI) })
	for _, g := range gpus {
		// The driver makes 1 (SPX), 2 (DPX), 4 (QPX) or 8 (CPX) partitions of a GPU.
		if !slices.Contains([]int{1, 2, 4, 8}, g.Partitions) {
			errs = append(errs, fmt.Errorf("GPU %s: %d partitions; the driver makes 1, 2, 4 or 8 (is the capture whole?)", g.PCI, g.Partitions))
		}
	}
	return gpus, errors.Join(errs...)
}
