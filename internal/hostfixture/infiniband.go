// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package hostfixture // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"

import (
	"fmt"
	"maps"
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

// IBCounters are a port's counters/ files (the IB PMA counters, which mlx5 keeps for RoCE ports
// too); port_*_data count 4-byte words, as the kernel's do.
func IBCounters(n, symbolErrors, linkDowned uint64) map[string]uint64 {
	return map[string]uint64{
		"excessive_buffer_overrun_errors": 0, "link_downed": linkDowned, "link_error_recovery": linkDowned + n,
		"local_link_integrity_errors": 0, "multicast_rcv_packets": 1200 + n, "multicast_xmit_packets": 300 + n,
		"port_rcv_constraint_errors": 0, "port_rcv_data": 625_000_000_000 * (n + 1), "port_rcv_discards": 0,
		"port_rcv_errors": symbolErrors / 2, "port_rcv_packets": 150_000_000 * (n + 1), "port_rcv_remote_physical_errors": 0,
		"port_rcv_switch_relay_errors": 0, "port_xmit_constraint_errors": 0, "port_xmit_data": 600_000_000_000 * (n + 1),
		"port_xmit_discards": n, "port_xmit_packets": 140_000_000 * (n + 1), "port_xmit_wait": 5_000_000 * (n + 1),
		"symbol_error": symbolErrors, "unicast_rcv_packets": 149_000_000 * (n + 1), "unicast_xmit_packets": 139_000_000 * (n + 1),
		"VL15_dropped": 0,
	}
}

// HwCounters are a port's hw_counters/ files as mlx5 writes them: the transport's on every port,
// congestion control (ECN, CNPs) and RoCE's retransmission counters on Ethernet ports only;
// req_transport_retries_exceeded is one that procfs does not know (skipped).
func HwCounters(n uint64, roce bool) map[string]uint64 {
	c := map[string]uint64{
		"duplicate_request": n, "implied_nak_seq_err": 0, "lifespan": 10, "local_ack_timeout_err": 2 * n,
		"out_of_buffer": 0, "out_of_sequence": 3 * n, "packet_seq_err": n, "req_cqe_error": 0,
		"req_cqe_flush_error": 0, "req_remote_access_errors": 0, "req_remote_invalid_request": 0,
		"resp_cqe_error": 0, "resp_cqe_flush_error": 0, "resp_local_length_error": 0,
		"resp_remote_access_errors": 0, "rnr_nak_retry_err": 0, "rx_atomic_requests": 0,
		"rx_dct_connect": 0, "rx_read_requests": 40_000 * (n + 1), "rx_write_requests": 9_000_000 * (n + 1),
		"req_transport_retries_exceeded": 0,
	}
	if roce {
		maps.Copy(c, map[string]uint64{
			"np_cnp_sent": 52_000 * (n + 1), "np_ecn_marked_roce_packets": 61_000 * (n + 1), "rp_cnp_handled": 48_000 * (n + 1),
			"rp_cnp_ignored": 0, "roce_adp_retrans": 5 * n, "roce_adp_retrans_to": n, "roce_slow_restart": 0,
			"roce_slow_restart_cnps": 0, "roce_slow_restart_trans": 0, "rx_icrc_encapsulated": 0,
		})
	}
	return c
}

// ConnectX7 is mlx5_<n>, a ConnectX-7 HCA (MT4129) with one port; n also varies its counters.
func ConnectX7(n uint64, port HCAPort) HCA {
	port.Number = 1
	return HCA{
		Name: fmt.Sprintf("mlx5_%d", n), FirmwareVersion: "28.39.1002", BoardID: "MT_0000000838", HCAType: "MT4129",
		NodeGUID: fmt.Sprintf("a088:c203:0041:8e%02x", 0x20+n), Ports: []HCAPort{port},
	}
}
