// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"
)

// Check names.
const (
	checkBackend       = "backend"
	checkGPUCount      = "gpu_count"
	checkGPUHealth     = "gpu_health"
	checkRecovery      = "recovery_action"
	checkXID           = "xid"
	checkNVLink        = "nvlink"
	checkClocks        = "clocks"
	checkDriverVersion = "driver_version"
	checkInfiniBand    = "infiniband"
	// checkReads is the reads themselves: their child process ended without a report, or was
	// killed at -timeout.
	checkReads = "reads"
)

// Actions the connector does not have: what the check finds beyond the GPUs' health.
const (
	actionCheckInfiniBand = "check_infiniband"
	actionUpdateDriver    = "update_driver"
)

// outcome is one check's result: a summary, and its findings (a check with a failing finding
// fails; one with only unknown ones is unknown).
type outcome struct {
	status   string
	detail   string
	findings []finding
}

// checks is the checks table, in the order the report lists them. One more reading is one more
// entry.
var checks = []struct {
	name string
	run  func(r *reading) outcome
}{
	{checkBackend, checkBackendUp},
	{checkGPUCount, checkCount},
	{checkGPUHealth, checkJudged},
	{checkRecovery, checkDriverRecovery},
	{checkXID, checkXIDs},
	{checkNVLink, checkNVLinks},
	{checkClocks, checkClockSlowdown},
	{checkDriverVersion, checkDriver},
	{checkInfiniBand, checkIB},
}

// judge turns a reading into the report.
func judge(r *reading) *report {
	rep := newReport(r.node, r.backend)
	for _, g := range r.gpus {
		rep.GPUs = append(rep.GPUs, g.gpuReport)
	}
	for _, c := range checks {
		o := c.run(r)
		for i := range o.findings {
			o.findings[i].Check = c.name
			if o.status == "" && o.findings[i].Status == checkFail {
				o.status = checkFail
			}
		}
		if o.status == "" && len(o.findings) > 0 {
			o.status = checkUnknown
		}
		if o.status == "" {
			o.status = checkPass
		}
		rep.Checks = append(rep.Checks, checkReport{Name: c.name, Status: o.status, Detail: o.detail})
		rep.Findings = append(rep.Findings, o.findings...)
	}
	return rep
}

// ready is whether the backend listed the GPUs: every GPU check needs it.
func (r *reading) ready() bool {
	return r.err == nil && (r.nvmlUp == nil || *r.nvmlUp == 1) && r.detected != nil
}

var notRead = outcome{status: checkUnknown, detail: "the GPUs could not be listed"}

func checkBackendUp(r *reading) outcome {
	if r.ready() {
		return outcome{detail: fmt.Sprintf("%d GPUs listed", *r.detected)}
	}
	msg := "the GPU driver answered no device count"
	switch {
	case r.err != nil:
		msg = r.err.Error()
	case r.nvmlUp != nil && *r.nvmlUp == 0:
		msg = "NVML could not be initialized: no NVIDIA driver, a driver whose kernel module and library differ, or no permission (-v says which)"
		for _, c := range r.late {
			if c.GPU < 0 {
				msg = fmt.Sprintf("NVML's %s did not return within -call-timeout %s", c.Call, r.opts.CallTimeout)
				break
			}
		}
	}
	return outcome{findings: []finding{{Status: checkUnknown, Subject: "the node", Message: msg}}}
}

func checkCount(r *reading) outcome {
	switch {
	case r.opts.GPUs < 0:
		return outcome{status: checkSkipped, detail: "no -gpus"}
	case !r.ready():
		return notRead
	}
	o := outcome{detail: fmt.Sprintf("%d GPUs, %d expected", *r.detected, r.opts.GPUs)}
	for i := range r.faults {
		if f := &r.faults[i]; f.Kind == "gpu_missing" {
			o.findings = append(o.findings, fromFault(f, r, fmt.Sprintf("%d GPUs detected, %d expected (-gpus): %s", *r.detected, r.opts.GPUs, f.What)))
		}
	}
	return o
}

// checkJudged has every state fault the k8s_gpu_health connector judges on a GPU: lost, hung,
// ECC, row remaps, retired pages, PCIe link, NVLink fabric, whatever it learns next.
func checkJudged(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	var o outcome
	for i := range r.faults {
		f := &r.faults[i]
		if f.GPU == "" || f.Kind == "xid" {
			continue
		}
		msg := f.What
		if f.Kind == "driver_hang" {
			msg = hungMessage(r.gpuByMinor(f.Minor), r.opts.CallTimeout)
		}
		o.findings = append(o.findings, fromFault(f, r, msg))
	}
	o.detail = fmt.Sprintf("%d GPU faults", len(o.findings))
	return o
}

// checkXIDs has the XIDs since boot of the classes -xid-classes names: the connector's faults,
// and those on a PCI address no GPU has now (a GPU that fell off the bus may be gone).
func checkXIDs(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	if !r.opts.Kmsg {
		return outcome{status: checkSkipped, detail: "-kmsg=false: the kernel log is not read"}
	}
	var o outcome
	if r.res.KernelLogErr != nil {
		o.findings = append(o.findings, finding{Status: checkUnknown, Subject: "the node", Message: fmt.Sprintf("the kernel log could not be read, so XIDs since boot are unknown (run as root or with CAP_SYSLOG, or give -kmsg-path): %v", r.res.KernelLogErr)})
	}
	for i := range r.faults {
		if f := &r.faults[i]; f.Kind == "xid" && f.GPU != "" {
			o.findings = append(o.findings, fromFault(f, r, f.What))
		}
	}
	classes := map[xid.Resolution]bool{}
	for _, c := range r.opts.XIDClasses {
		classes[c] = true
	}
	total := 0
	for _, rl := range r.res.XIDs.ResourceLogs().All() {
		_, onGPU := rl.Resource().Attributes().Get(gpunames.KeyMinorNumber)
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				total++
				a := lr.Attributes()
				class := xid.Resolution(str(a, gpunames.KeyResolution))
				if onGPU || !classes[class] {
					continue
				}
				code := str(a, gpunames.KeyXID)
				o.findings = append(o.findings, finding{
					Status: checkFail, Subject: "PCI " + str(a, gpunames.KeyPCIBusID), Action: string(class), ActionWords: str(a, gpunames.KeyXIDAction),
					Severity: str(a, gpunames.KeyXIDSeverity), Message: fmt.Sprintf("XID %s, %s, on a PCI address that matches no GPU NVML could identify (one that fell off the bus may answer no more)", code, str(a, gpunames.KeyXIDMeaning)),
				})
			}
		}
	}
	o.detail = fmt.Sprintf("%d XIDs since boot, classes failing: %s", total, joinClasses(r.opts.XIDClasses))
	return o
}

// checkNVLinks compares each GPU's links up with -nvlinks, or with the most its peers of the
// same model have: the gpu receiver judges a link down only once it saw it up, which one look
// cannot.
func checkNVLinks(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	want := map[string]int{}
	for _, g := range r.gpus {
		if g.NVLinksUp != nil {
			want[g.Model] = max(want[g.Model], *g.NVLinksUp)
		}
	}
	if len(want) == 0 {
		return outcome{detail: "no GPU reports NVLink"}
	}
	var o outcome
	for _, g := range r.gpus {
		if g.NVLinksUp == nil {
			continue
		}
		expected, by := want[g.Model], "its peers of the same model have"
		if r.opts.NVLinks >= 0 {
			expected, by = r.opts.NVLinks, "-nvlinks expects"
		}
		if *g.NVLinksUp >= expected {
			continue
		}
		var down []string
		for _, l := range slices.Sorted(maps.Keys(g.links)) {
			if g.links[l] == 0 {
				down = append(down, l)
			}
		}
		o.findings = append(o.findings, gpuFinding(g, finding{
			Status: checkFail, Action: string(k8sgpuhealthconnector.ActionCheckNVLink), Severity: string(xid.SeverityWarning),
			ActionWords: xid.ResolutionCheckNVLink.Action(),
			Message:     fmt.Sprintf("%d NVLinks up where %s %d (down: %s)", *g.NVLinksUp, by, expected, strings.Join(down, ", ")),
		}))
	}
	o.detail = "NVLinks up as expected"
	if len(o.findings) > 0 {
		o.detail = fmt.Sprintf("%d GPUs with NVLinks down", len(o.findings))
	}
	return o
}

// checkClockSlowdown fails a GPU whose clocks the hardware slows for heat or power: the
// connector takes it as a passing state, but before a job it means cooling or power to inspect.
func checkClockSlowdown(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	o := outcome{detail: "no GPU slowed by heat or power"}
	for _, g := range r.gpus {
		for _, c := range []struct{ condition, what, words string }{
			{"thermal", "its clocks are slowed for heat (thermal slowdown)", "drain the node and have the GPU's cooling inspected (fans, airflow, heat sink)"},
			{"power", "its clocks are slowed by the hardware for power (HW slowdown or power brake)", "drain the node and have its power supply inspected (PSUs, the power brake signal)"},
		} {
			if g.Health[c.condition] > 0 {
				o.findings = append(o.findings, gpuFinding(g, finding{
					Status: checkFail, Action: string(k8sgpuhealthconnector.ActionInspectHardware), Severity: string(xid.SeverityWarning),
					Message: c.what, ActionWords: c.words,
				}))
			}
		}
	}
	if len(o.findings) > 0 {
		o.detail = fmt.Sprintf("%d slowdowns", len(o.findings))
	}
	return o
}

// checkDriverRecovery fails a GPU whose driver asks for a recovery action: the writer only
// reclasses the faults it finds by it, but a check before a job takes the driver's word alone.
// An action this build does not know is a GPU to inspect.
func checkDriverRecovery(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	o := outcome{detail: "no driver asks for a recovery action"}
	reported := 0
	for _, g := range r.gpus {
		if g.recovery == nil {
			continue
		}
		reported++
		if *g.recovery == recoveryaction.None {
			continue
		}
		action, ok := k8sgpuhealthconnector.DriverAction(*g.recovery)
		if !ok {
			action = k8sgpuhealthconnector.ActionInspectHardware
		}
		o.findings = append(o.findings, gpuFinding(g, finding{
			Status: checkFail, Kind: "recovery_action", Action: string(action), Severity: string(xid.SeverityFatal),
			Message:     "the driver asks for a recovery action: " + g.recovery.Words(),
			ActionWords: "drain the node, then: " + g.recovery.Words(),
		}))
	}
	switch {
	case len(o.findings) > 0:
		o.detail = fmt.Sprintf("%d GPUs with a recovery action", len(o.findings))
	case reported == 0:
		o.detail = "the driver does not report it (before R565)"
	}
	return o
}

func checkDriver(r *reading) outcome {
	if !r.ready() {
		return notRead
	}
	versions := map[string][]int{}
	for _, g := range r.gpus {
		if g.DriverVersion != "" {
			versions[g.DriverVersion] = append(versions[g.DriverVersion], g.Index)
		}
	}
	if len(versions) == 0 {
		return outcome{detail: "no GPU reports a driver version"}
	}
	var o outcome
	all := slices.Sorted(maps.Keys(versions))
	o.detail = strings.Join(all, ", ")
	want := r.opts.DriverVersion
	if want == "" && len(all) > 1 {
		want = all[len(all)-1]
		o.detail += ": not the same on every GPU"
	}
	if want == "" {
		return o
	}
	for _, g := range r.gpus {
		if g.DriverVersion != "" && g.DriverVersion != want {
			o.findings = append(o.findings, gpuFinding(g, finding{
				Status: checkFail, Action: actionUpdateDriver, Severity: string(xid.SeverityWarning),
				ActionWords: "drain the node and install the driver the node pool runs, then reboot",
				Message:     fmt.Sprintf("driver %s, where %s is expected", g.DriverVersion, want),
			}))
		}
	}
	return o
}

// checkIB counts the RDMA ports ACTIVE at the expected rate or faster, as the fabric alerts'
// node:infiniband_active_ports_at_rate:count does.
func checkIB(r *reading) outcome {
	if r.opts.IBPorts == 0 {
		return outcome{status: checkSkipped, detail: "no -ib-ports"}
	}
	if r.ibErr != nil {
		return outcome{findings: []finding{{Status: checkUnknown, Subject: "the node", Message: fmt.Sprintf("the RDMA ports could not be listed: %v", r.ibErr)}}}
	}
	type port struct {
		state, rate float64
	}
	ports := map[string]*port{}
	for _, rm := range r.ib.ResourceMetrics().All() {
		eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
			key := str(dp.Attributes(), "device") + " port " + str(dp.Attributes(), "port")
			if ports[key] == nil && (name == taskreceiver.InfiniBandStateMetric || name == taskreceiver.InfiniBandRateMetric) {
				ports[key] = &port{}
			}
			switch name {
			case taskreceiver.InfiniBandStateMetric:
				ports[key].state = dp.DoubleValue()
			case taskreceiver.InfiniBandRateMetric:
				ports[key].rate = dp.DoubleValue()
			}
		})
	}
	const active = 4
	wantRate := r.opts.IBRateGbps * taskreceiver.GbpsToBytes
	var good, short []string
	for _, name := range slices.Sorted(maps.Keys(ports)) {
		p := ports[name]
		if p.state == active && p.rate >= wantRate {
			good = append(good, name)
		} else {
			short = append(short, fmt.Sprintf("%s (%s, %g Gb/s)", name, ibState(p.state), p.rate/taskreceiver.GbpsToBytes))
		}
	}
	o := outcome{detail: fmt.Sprintf("%d of %d ports ACTIVE at %g Gb/s or faster, %d expected", len(good), len(ports), r.opts.IBRateGbps, r.opts.IBPorts)}
	if r.ibUnreadable > 0 {
		o.detail += fmt.Sprintf("; %d HCAs could not be read", r.ibUnreadable)
	}
	if len(good) < r.opts.IBPorts {
		o.findings = append(o.findings, finding{
			Status: checkFail, Subject: "the node", Action: actionCheckInfiniBand, Severity: string(xid.SeverityWarning),
			ActionWords: "drain the node and check the ports below their rate or down: cable, transceiver, switch port, HCA firmware",
			Message:     fmt.Sprintf("%d RDMA ports ACTIVE at %g Gb/s or faster, %d expected; the others: %s", len(good), r.opts.IBRateGbps, r.opts.IBPorts, strings.Join(short, "; ")),
		})
	}
	return o
}

// ibState names a port's logical state (node_infiniband_state_id).
func ibState(id float64) string {
	switch id {
	case 1:
		return "DOWN"
	case 2:
		return "INIT"
	case 3:
		return "ARMED"
	case 4:
		return "ACTIVE"
	case 5:
		return "ACTIVE_DEFER"
	}
	return fmt.Sprintf("state %g", id)
}

func (r *reading) gpuByMinor(minor string) *gpuReading {
	for _, g := range r.gpus {
		if fmt.Sprint(g.Index) == minor {
			return g
		}
	}
	return nil
}

// fromFault is a connector's fault as a finding.
func fromFault(f *k8sgpuhealthconnector.CheckFault, r *reading, msg string) finding {
	fd := finding{
		Status: checkFail, Subject: "the node", Kind: f.Kind, XID: f.XID, Action: string(f.Action), ActionWords: f.ActionWords,
		Severity: string(f.Severity), Message: msg,
	}
	if g := r.gpuByMinor(f.Minor); g != nil && f.Minor != "" {
		return gpuFinding(g, fd)
	}
	return fd
}

func gpuFinding(g *gpuReading, f finding) finding {
	index := g.Index
	f.GPU, f.UUID = &index, g.UUID
	f.Subject = fmt.Sprintf("GPU %d", g.Index)
	if g.UUID != "" {
		f.Subject += " (" + g.UUID + ")"
	}
	return f
}

// hungMessage says which calls of g did not return.
func hungMessage(g *gpuReading, callTimeout time.Duration) string {
	var calls []string
	if g != nil {
		calls = slices.Sorted(maps.Keys(g.timeouts))
	}
	return fmt.Sprintf("hung: NVML calls on the GPU did not return within -call-timeout %s (%s)", callTimeout, strings.Join(calls, ", "))
}

// hungFinding is a GPU whose call passed its deadline, as the parent knows it from the child's
// lines when the child gave no report.
func hungFinding(index int, uuid, call string, callTimeout time.Duration) finding {
	g := &gpuReading{gpuReport: gpuReport{Index: index, UUID: uuid}, timeouts: map[string]int64{call: 1}}
	return gpuFinding(g, finding{
		Check: checkGPUHealth, Status: checkFail, Kind: "driver_hang", Action: string(k8sgpuhealthconnector.ActionReboot),
		ActionWords: xid.ResolutionReboot.Action(), Severity: string(xid.SeverityFatal), Message: hungMessage(g, callTimeout),
	})
}
