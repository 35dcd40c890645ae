// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// The connector reads the gpu receiver's health per GPU and its GPU count per node (metrics),
// and its XIDs (log records), by package gpunames's names: the scale-out layout's gateways
// forward exactly those to the writer (the gpu_health_filter processor, internal/healthdata).

// judge keeps each node's faults from the agents' data. It writes nothing: the writer takes
// what it judged to the API server.
type judge struct {
	cfg   *Config
	clock clock.Clock
	// xidResolutions are the XID classes that call for action.
	xidResolutions map[xid.Resolution]bool

	mu    sync.Mutex
	nodes map[string]*nodeHealth
}

// nodeHealth is what the judge knows of one node.
type nodeHealth struct {
	faults map[faultKey]*fault
	// sampled is the newest data time per GPU and gpu_health condition: an older sample (data
	// out of order) never overrides a newer one.
	sampled map[sample]time.Time
	// latest is the newest data time of the node's health data.
	latest time.Time
	// pending are the occurrences the writer has not made Events of yet, by Event key: one per
	// fault however many times it occurred, so that a storm takes no more memory than one.
	pending map[string]*occurrence
	// newestXID is the data time of the newest XID counted, by Event key. An agent sends its XIDs
	// in order and at least once: one not newer was counted already (a batch sent again).
	newestXID map[string]time.Time

	// What the node's object in the API says (see node): its boot, and when a person last
	// marked its faults resolved. Evidence older than either raises nothing.
	bootID               string
	rebootedAt, resolved time.Time
	// adopted: the writer has compared this node with its condition in the API once (adopt).
	adopted bool
	// validation is what the validation gate reads.
	validation passRun
	// driver is each GPU's latest recovery action from its driver (gpu_recovery_action).
	driver map[string]recoveryaction.Action
}

type sample struct{ gpu, condition string }

// occurrence is a fault that occurred n times since the writer last made its Event.
type occurrence struct {
	f           fault
	n           int
	replayed    bool
	first, last time.Time
}

func newJudge(cfg *Config, clk clock.Clock) *judge {
	j := &judge{cfg: cfg, clock: clk, xidResolutions: map[xid.Resolution]bool{}, nodes: map[string]*nodeHealth{}}
	for _, r := range cfg.Faults.XIDResolutions {
		j.xidResolutions[r] = true
	}
	return j
}

// node is name's health, made when first needed (then isNew); j.mu is held.
func (j *judge) node(name string) (n *nodeHealth, isNew bool) {
	n = j.nodes[name]
	if n == nil {
		n = &nodeHealth{faults: map[faultKey]*fault{}, sampled: map[sample]time.Time{}, pending: map[string]*occurrence{}, newestXID: map[string]time.Time{}, driver: map[string]recoveryaction.Action{}}
		j.nodes[name] = n
		isNew = true
	}
	return n, isNew
}

// gpuOf is a GPU resource's identity: its UUID, or its minor number for a GPU lost before its
// UUID could be read; empty for the node's own resource.
func gpuOf(attrs pcommon.Map) (gpu, minor string) {
	minor = str(attrs, gpunames.KeyMinorNumber)
	if uuid := str(attrs, gpunames.KeyUUID); uuid != "" {
		return uuid, minor
	}
	if minor != "" {
		return "#" + minor, minor
	}
	return "", ""
}

func str(attrs pcommon.Map, key string) string {
	if v, ok := attrs.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// consumeMetrics judges the health states in md and returns the nodes whose faults changed.
func (j *judge) consumeMetrics(md pmetric.Metrics) []string {
	now := j.clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	var changed []string
	for _, rm := range md.ResourceMetrics().All() {
		attrs := rm.Resource().Attributes()
		name := str(attrs, gpunames.KeyNodeName)
		if name == "" {
			continue
		}
		gpu, minor := gpuOf(attrs)
		var detected, configured, checkStatus, checkEnded pmetric.NumberDataPoint
		var haveDetected, haveConfigured, haveCheckStatus, haveCheckEnded bool
		touched := false
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				switch m.Name() {
				case gpunames.GPUHealth:
					if gpu == "" {
						continue
					}
					for _, dp := range m.Gauge().DataPoints().All() {
						if dp.Flags().NoRecordedValue() {
							continue
						}
						touched = j.observe(name, gpu, minor, str(dp.Attributes(), gpunames.KeyCondition), dp.IntValue(), dp.Timestamp().AsTime(), now) || touched
					}
				case gpunames.GPURecoveryAction:
					if gpu == "" {
						continue
					}
					if dp, ok := last(m.Gauge().DataPoints()); ok {
						touched = j.observeDriver(name, gpu, recoveryaction.Action(dp.IntValue()), dp.Timestamp().AsTime(), now) || touched
					}
				case gpunames.GPUDevicesDetected:
					detected, haveDetected = last(m.Gauge().DataPoints())
				case gpunames.ConfiguredGPUCount:
					configured, haveConfigured = last(m.Gauge().DataPoints())
				case gpunames.GPUNodeCheckStatus:
					checkStatus, haveCheckStatus = last(m.Gauge().DataPoints())
				case gpunames.GPUNodeCheckTimestampSeconds:
					checkEnded, haveCheckEnded = last(m.Gauge().DataPoints())
				}
			}
		}
		// The node's GPU count: a fault when it has fewer GPUs than it should; nothing is known
		// while NVML is down (no gpu_devices_detected).
		if haveDetected {
			missing := int64(0)
			if haveConfigured {
				missing = configured.IntValue() - detected.IntValue()
			}
			touched = j.observe(name, "", "", gpuCount, missing, detected.Timestamp().AsTime(), now) || touched
			count := int64(-1)
			if haveConfigured {
				count = configured.IntValue()
			}
			n, _ := j.node(name)
			touched = j.collection(n, detected.IntValue(), count, detected.Timestamp().AsTime(), now) || touched
		}
		if haveCheckStatus && haveCheckEnded {
			n, _ := j.node(name)
			ended := time.Unix(0, int64(checkEnded.DoubleValue()*1e9))
			touched = n.validation.nodeCheck(checkStatus.IntValue(), ended) || touched
		}
		if touched && !slices.Contains(changed, name) {
			changed = append(changed, name)
		}
	}
	return changed
}

// last is the latest live point of a gauge.
func last(dps pmetric.NumberDataPointSlice) (pmetric.NumberDataPoint, bool) {
	for i := dps.Len() - 1; i >= 0; i-- {
		if !dps.At(i).Flags().NoRecordedValue() {
			return dps.At(i), true
		}
	}
	return pmetric.NumberDataPoint{}, false
}

// observe takes one sample of one gpu_health condition (or the node's GPU count) at data time
// t, and reports whether the node's faults changed, or the node is new (its condition is to be
// written the first time). j.mu is held.
func (j *judge) observe(name, gpu, minor, condition string, level int64, t, now time.Time) bool {
	if now.Sub(t) > j.cfg.MaxDataAge {
		// A state from a replayed backlog: the state now is in the fresh data that follows it.
		return false
	}
	n, changed := j.node(name)
	s := sample{gpu, condition}
	if !t.After(n.sampled[s]) {
		return changed
	}
	n.sampled[s] = t
	if t.After(n.latest) {
		n.latest = t
	}
	if gpu != "" {
		n.validation.sample(gpu, minor, condition, level, t)
	}
	for i := range faultKinds {
		k := &faultKinds[i]
		if k.config == nil || k.condition != condition || !k.config(&j.cfg.Faults).Enabled {
			continue
		}
		key := faultKey{gpu: gpu, kind: k.kind}
		f := n.faults[key]
		if !k.shows(level) || !t.After(n.resolved) {
			if f != nil {
				delete(n.faults, key)
				changed = changed || f.open
			}
			continue
		}
		if f == nil {
			f = &fault{faultKey: key, minor: minor, what: k.what, action: k.action, severity: k.severity, since: t}
			f.takeDriver(n.driver[gpu])
			n.faults[key] = f
		}
		f.seen = t
		if !f.open && t.Sub(f.since) >= k.config(&j.cfg.Faults).For {
			f.open = true
			n.occur(f, false, t)
			changed = true
		}
	}
	return changed
}

// recoveryCondition keys the driver's recovery action among a GPU's samples.
const recoveryCondition = "recovery_action"

// observeDriver takes a GPU's recovery action from its driver at data time t: its faults take
// their action from it. It reports whether an open fault's action changed. j.mu is held.
func (j *judge) observeDriver(name, gpu string, action recoveryaction.Action, t, now time.Time) bool {
	if now.Sub(t) > j.cfg.MaxDataAge {
		return false
	}
	n, changed := j.node(name)
	s := sample{gpu, recoveryCondition}
	if !t.After(n.sampled[s]) {
		return changed
	}
	n.sampled[s] = t
	n.driver[gpu] = action
	for _, f := range n.faults {
		if f.gpu == gpu && f.takeDriver(action) && f.open {
			changed = true
		}
	}
	return changed
}

// consumeLogs judges the XIDs in ld and returns the nodes whose faults changed or that have
// an Event to write.
func (j *judge) consumeLogs(ld plog.Logs) []string {
	now := j.clock.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	var changed []string
	for _, rl := range ld.ResourceLogs().All() {
		attrs := rl.Resource().Attributes()
		name := str(attrs, gpunames.KeyNodeName)
		gpu, minor := gpuOf(attrs)
		if name == "" || gpu == "" {
			continue
		}
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				if lr.EventName() == gpunames.EventGPUXID && j.observeXID(name, gpu, minor, lr, now) && !slices.Contains(changed, name) {
					changed = append(changed, name)
				}
			}
		}
	}
	return changed
}

// observeXID takes one XID occurrence; it reports whether it is one that calls for action.
// j.mu is held.
func (j *judge) observeXID(name, gpu, minor string, lr plog.LogRecord, now time.Time) bool {
	rec := lr.Attributes()
	if !j.xidResolutions[xid.Resolution(str(rec, gpunames.KeyResolution))] {
		return false
	}
	code, err := strconv.ParseUint(str(rec, gpunames.KeyXID), 10, 32)
	if err != nil {
		return false
	}
	t := lr.Timestamp().AsTime()
	if lr.Timestamp() == 0 {
		t = lr.ObservedTimestamp().AsTime()
	}
	f := fault{
		faultKey: faultKey{gpu: gpu, kind: metadata.AttributeFaultXid, code: code},
		minor:    minor,
		what:     fmt.Sprintf("XID %d, %s", code, str(rec, gpunames.KeyXIDMeaning)),
		action:   Action(str(rec, gpunames.KeyResolution)),
		severity: xid.Severity(str(rec, gpunames.KeyXIDSeverity)),
		since:    t, seen: t, open: true, sticky: true,
	}
	n, _ := j.node(name)
	f.takeDriver(n.driver[gpu])
	replayed := now.Sub(t) > j.cfg.MaxDataAge
	key := f.eventKey(replayedPrefix(replayed))
	if !t.After(n.newestXID[key]) {
		return false
	}
	n.newestXID[key] = t
	if replayed {
		n.occur(&f, true, t)
		return true
	}
	// Evidence from before the node last rebooted, or before a person marked its faults
	// resolved, is history.
	if !t.After(n.rebootedAt) || !t.After(n.resolved) {
		return false
	}
	if open := n.faults[f.faultKey]; open != nil {
		open.seen = maxTime(open.seen, t)
		open.since = minTime(open.since, t)
		n.occur(open, false, t)
		return true
	}
	n.faults[f.faultKey] = &f
	n.occur(&f, false, t)
	return true
}

// replayedPrefix sets the Event keys of replayed occurrences apart: their Events are others.
func replayedPrefix(replayed bool) string {
	if replayed {
		return "replayed/"
	}
	return ""
}

// occur counts an occurrence of f, at data time t, for the writer's Events.
func (n *nodeHealth) occur(f *fault, replayed bool, t time.Time) {
	key := f.eventKey(replayedPrefix(replayed))
	o := n.pending[key]
	if o == nil {
		o = &occurrence{replayed: replayed, first: t}
		n.pending[key] = o
	}
	o.f = *f
	o.n++
	o.first, o.last = minTime(o.first, t), maxTime(o.last, t)
}

// setNode takes what the node's object in the API says: a new boot ends its XIDs (a reboot
// resets every GPU), and the resolved annotation ends every fault it had then. It reports
// whether faults ended. j.mu is held.
func (n *nodeHealth) setNode(bootID string, resolved, now time.Time) bool {
	ended := false
	if bootID != "" && n.bootID != "" && bootID != n.bootID {
		n.rebootedAt = now
		for key, f := range n.faults {
			if f.sticky {
				delete(n.faults, key)
				ended = true
			}
		}
	}
	if bootID != "" {
		n.bootID = bootID
	}
	if resolved.After(n.resolved) {
		n.resolved = resolved
		for key, f := range n.faults {
			if !f.seen.After(resolved) {
				delete(n.faults, key)
				ended = ended || f.open
			}
		}
	}
	return ended
}

// expire ends the states of GPUs the node's data no longer has (a GPU replaced, taken out): a
// GPU that reported nothing for max_data_age while its node reported on. j.mu is held.
func (n *nodeHealth) expire(maxAge time.Duration) {
	for key, f := range n.faults {
		if !f.sticky && n.latest.Sub(f.seen) > maxAge {
			delete(n.faults, key)
		}
	}
}

// open is the node's open faults, in the order the condition lists them.
func (n *nodeHealth) open() []*fault {
	var open []*fault
	for _, f := range n.faults {
		if f.open {
			open = append(open, f)
		}
	}
	slices.SortFunc(open, func(a, b *fault) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return open
}

// takePending hands the occurrences over to the writer.
func (n *nodeHealth) takePending() []*occurrence {
	out := make([]*occurrence, 0, len(n.pending))
	for _, o := range n.pending {
		out = append(out, o)
	}
	clear(n.pending)
	slices.SortFunc(out, func(a, b *occurrence) int { return a.first.Compare(b.first) })
	return out
}

// maxMessageFaults bounds the condition's message: the rest are counted.
const maxMessageFaults = 8

// verdict is a node's condition as the judge sees it.
type verdict struct {
	healthy bool
	// top is the fault the reason names; class and severity are the node's: the largest of its
	// faults'. action is the recommended action: class, or the one after it when the same class
	// came back soon after the node was returned to service (escalate).
	top           *fault
	class, action Action
	severity      xid.Severity
	reason        string
	// faults are the open faults in words; latest is when the newest of them began.
	faults string
	latest time.Time
}

const (
	reasonHealthy  = "NoGPUFault"
	messageHealthy = "no GPU fault that calls for action"
)

// verdict is the node's condition from its open faults.
func (n *nodeHealth) verdict() verdict {
	open := n.open()
	if len(open) == 0 {
		return verdict{healthy: true, reason: reasonHealthy}
	}
	v := verdict{top: open[0], reason: kindOf(open[0].kind).reason, class: open[0].action, severity: open[0].severity}
	lines := make([]string, 0, min(len(open), maxMessageFaults)+1)
	for i, f := range open {
		if f.action.rank() > v.class.rank() {
			v.class = f.action
		}
		if severityRank(f.severity) > severityRank(v.severity) {
			v.severity = f.severity
		}
		v.latest = maxTime(v.latest, f.since)
		if i < maxMessageFaults {
			lines = append(lines, f.describe())
		}
	}
	if len(open) > maxMessageFaults {
		lines = append(lines, fmt.Sprintf("and %d more", len(open)-maxMessageFaults))
	}
	v.action, v.faults = v.class, strings.Join(lines, "; ")
	return v
}

// message is the condition's message: the recommended action, then the faults.
func (v verdict) message() string {
	if v.healthy {
		return messageHealthy
	}
	escalated := ""
	if v.action != v.class {
		escalated = fmt.Sprintf(" (escalated from %s: that class of fault came back soon after the node was returned to service)", v.class)
	}
	return fmt.Sprintf("%s: %s%s. %s", v.action, v.action.words(), escalated, v.faults)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
