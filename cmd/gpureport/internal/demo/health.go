// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"fmt"
	"iter"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/fixture"
)

// The week's GPU health as the agents read it and the gateway's k8s_gpu_health connector judged
// it, with the quarantine and the validation gate on (docs/actions.md): what the fleet-health
// rules record and the report's "Fleet health" section reads.
//
// gpu-node-03's GPU 3 (offBus): a double-bit ECC error and a pending row remapping an hour before
// it falls off the bus, never repaired within the week: unhealthy and quarantined from then on,
// for reset_gpu, then for reboot once the XID and the lost GPU come. Four faults.
//
// gpu-node-01's GPU 2 (escalating): a row remapping pending three times, each time back within
// the escalation window of its return to service, so the connector escalates it: quarantined
// for reset_gpu (1 h), then reboot (2 h), then inspect_hardware (12 h); after each, the gate
// holds the node for 30 minutes before it takes jobs again. Its readings are in gpu_health only
// (not the remap gauges), so that the efficiency sections report what they did before.
var (
	escalating = struct{ node, gpu int }{0, 2}
	repairs    = []struct {
		stretch
		action, severity string
	}{
		{stretch{30 * time.Hour, 31 * time.Hour}, "reset_gpu", "warning"},
		{stretch{40 * time.Hour, 42 * time.Hour}, "reboot", "fatal"},
		{stretch{60 * time.Hour, 72 * time.Hour}, "inspect_hardware", "fatal"},
	}
	validationFor = 30 * time.Minute
	// eccAt is when gpu-node-03's GPU 3 has its ECC error; open is past the data's end.
	eccAt = offBusAt - time.Hour
	open  = 8 * 24 * time.Hour
	// gateway is the scrape's instance of the gateway's page.
	gateway = "10.0.0.2:9102"
)

// model is the GPU model of node n's GPUs: the Hopper node's are H100s, every other node's
// (the Slurm node's too) A100s.
func model(n int) string {
	if nodes[n].hopper {
		return "NVIDIA H100 80GB HBM3"
	}
	return "NVIDIA A100-SXM4-80GB"
}

// stretch is [from, to) as offsets from the week's start.
type stretch struct{ from, to time.Duration }

func (s stretch) holds(d time.Duration) bool { return d >= s.from && d < s.to }

// writeGPUInfo writes each GPU's identity: its model names its node pool in the report.
func writeGPUInfo(om *fixture.Writer, wk week, gpus []gpuRef) {
	om.Gauge("gpu_info", "The GPU's identity.")
	for _, r := range gpus {
		om.Series(r.gpu.Labels().With("model", model(r.n), "pci_bus_id", fmt.Sprintf("00000000:%02X:00.0", 0x07+r.g*0x10), "driver_version", "570.124.06"),
			wk.gauge(r.n, func(time.Time) (float64, bool) { return 1, true }))
	}
}

// writeHealthReadings writes what the agents read of the GPUs' health: the GPUs each node
// detects, and gpu_health for the conditions the demo's faults touch (nvml, memory_ecc,
// row_remap), also while a GPU is off the bus.
func writeHealthReadings(om *fixture.Writer, wk week, gpus []gpuRef) {
	om.Gauge("gpu_devices_detected", "GPUs the driver enumerates on the node.")
	for n, nd := range nodes {
		count := 0
		for _, k := range nd.groups {
			count += k
		}
		l := fixture.Labels{"job": fixture.ScrapeJob, "instance": nd.instance, "node_name": nd.name, "simulated": "true"}
		om.Series(l, wk.gauge(n, func(time.Time) (float64, bool) { return float64(count), true }))
	}
	om.Gauge("gpu_health", "Health per condition: 0 ok, 1 warning, 2 fatal.")
	for _, r := range gpus {
		ecc := r.n == offBus.node && r.g == offBus.gpu
		for _, c := range []struct {
			condition string
			value     func(d time.Duration) float64
		}{
			{"nvml", func(d time.Duration) float64 {
				if wk.lost(r.n, r.g, wk.start.Add(d)) {
					return 2
				}
				return 0
			}},
			{"memory_ecc", func(d time.Duration) float64 {
				if ecc && d >= eccAt {
					return 2
				}
				return 0
			}},
			{"row_remap", func(d time.Duration) float64 {
				if ecc && d >= eccAt {
					return 1
				}
				for _, rp := range repairs {
					if r.n == escalating.node && r.g == escalating.gpu && rp.holds(d) {
						return 1
					}
				}
				return 0
			}},
		} {
			om.Series(r.gpu.Labels().With("condition", c.condition), wk.gauge(r.n, func(t time.Time) (float64, bool) {
				return c.value(t.Sub(wk.start)), true
			}))
		}
	}
}

// writeHealthWriter writes the gateway's k8s_gpu_health series of the week's faults: the
// connector's gauges exist while their state holds, its counters from their first fault.
func writeHealthWriter(om *fixture.Writer, wk week) {
	node := func(n int, kv ...string) fixture.Labels {
		return fixture.Labels{"job": fixture.ScrapeJob, "instance": gateway, "node_name": nodes[n].name}.With(kv...)
	}
	type held struct {
		labels  fixture.Labels
		stretch stretch
	}
	var unhealthy, quarantined, validating []held
	for _, rp := range repairs {
		unhealthy = append(unhealthy, held{node(escalating.node, "fault", "row_remap_pending", "action", rp.action, "severity", rp.severity), rp.stretch})
		quarantined = append(quarantined, held{node(escalating.node, "action", rp.action, "dry_run", "false"), rp.stretch})
		validating = append(validating, held{node(escalating.node, "timed_out", "false", "dry_run", "false"), stretch{rp.to, rp.to + validationFor}})
	}
	unhealthy = append(unhealthy,
		held{node(offBus.node, "fault", "double_bit_ecc", "action", "reset_gpu", "severity", "fatal"), stretch{eccAt, offBusAt}},
		held{node(offBus.node, "fault", "xid", "action", "reboot", "severity", "fatal"), stretch{offBusAt, open}})
	quarantined = append(quarantined,
		held{node(offBus.node, "action", "reset_gpu", "dry_run", "false"), stretch{eccAt, offBusAt}},
		held{node(offBus.node, "action", "reboot", "dry_run", "false"), stretch{offBusAt, open}})
	for _, m := range []struct {
		name, help string
		series     []held
	}{
		{"gpu_node_unhealthy", "The node's GPUHealthy is False.", unhealthy},
		{"gpu_node_quarantined", "The quarantine holds the node cordoned for the action.", quarantined},
		{"gpu_node_validation_pending", "The validation gate holds the node.", validating},
	} {
		om.Gauge(m.name, m.help)
		for _, s := range m.series {
			om.Series(s.labels, wk.gatewayGauge(func(d time.Duration) (float64, bool) { return 1, s.stretch.holds(d) }))
		}
	}
	om.Counter("gpu_node_faults_total", "Faults that call for action as the writer judged them.")
	for _, f := range []struct {
		n     int
		fault string
		at    []time.Duration
	}{
		{escalating.node, "row_remap_pending", []time.Duration{repairs[0].from, repairs[1].from, repairs[2].from}},
		{offBus.node, "double_bit_ecc", []time.Duration{eccAt}},
		{offBus.node, "row_remap_pending", []time.Duration{eccAt}},
		{offBus.node, "xid", []time.Duration{offBusAt}},
		{offBus.node, "gpu_lost", []time.Duration{offBusAt}},
	} {
		om.Series(node(f.n, "fault", f.fault, "replayed", "false"), wk.gatewayGauge(func(d time.Duration) (float64, bool) {
			count := 0
			for _, at := range f.at {
				if d >= at {
					count++
				}
			}
			return float64(count), count > 0
		}))
	}
}

// gatewayGauge is a series of the gateway's page, scraped all week: v's value at each scrape
// (given as its offset from the week's start) where it says the series exists.
func (wk week) gatewayGauge(v func(d time.Duration) (float64, bool)) iter.Seq2[int64, float64] {
	return func(yield func(int64, float64) bool) {
		for t := wk.from.Truncate(ScrapeInterval); t.Before(wk.to); t = t.Add(ScrapeInterval) {
			if x, ok := v(t.Sub(wk.start)); ok && !yield(t.UnixMilli(), x) {
				return
			}
		}
	}
}
