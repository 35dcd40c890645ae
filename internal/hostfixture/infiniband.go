// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// HCA is an RDMA device as the kernel's ib_core lays it out under /sys/class/infiniband/<Name>.
type HCA struct {
	Name            string // mlx5_0
	FirmwareVersion string // fw_ver
	BoardID         string // board_id
	HCAType         string // hca_type, e.g. MT4129 (ConnectX-7)
	NodeGUID        string // node_guid
	Ports           []HCAPort
}

// HCAPort is one port of an HCA: ports/<Number>/.
type HCAPort struct {
	Number int
	// State, PhysState, Rate and LinkLayer are the files' text as the kernel writes it, e.g.
	// "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand" or "Ethernet".
	State, PhysState, Rate, LinkLayer string
	// Counters are counters/<name> (the IB PMA counters), HwCounters hw_counters/<name> (the
	// driver's own, RoCE's among them); a value is written as the kernel does, in decimal.
	Counters, HwCounters map[string]uint64
}

func (w *writer) infiniband(hcas []HCA) {
	for _, h := range hcas {
		dir := filepath.Join("sys/class/infiniband", h.Name)
		w.file(filepath.Join(dir, "fw_ver"), h.FirmwareVersion+"\n")
		w.file(filepath.Join(dir, "board_id"), h.BoardID+"\n")
		w.file(filepath.Join(dir, "hca_type"), h.HCAType+"\n")
		w.file(filepath.Join(dir, "node_guid"), h.NodeGUID+"\n")
		for _, p := range h.Ports {
			port := filepath.Join(dir, "ports", strconv.Itoa(p.Number))
			w.file(filepath.Join(port, "state"), p.State+"\n")
			w.file(filepath.Join(port, "phys_state"), p.PhysState+"\n")
			w.file(filepath.Join(port, "rate"), p.Rate+"\n")
			w.file(filepath.Join(port, "link_layer"), p.LinkLayer+"\n")
			for sub, counters := range map[string]map[string]uint64{"counters": p.Counters, "hw_counters": p.HwCounters} {
				for name, v := range counters {
					w.file(filepath.Join(port, sub, name), fmt.Sprintf("%d\n", v))
				}
			}
		}
	}
}
