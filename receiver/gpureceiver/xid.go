// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// xidOccurrence is one XID as a source saw it. gpu is nil when a kernel log line names a PCI
// address that no NVML device has.
type xidOccurrence struct {
	gpu     *gpuIdentity
	pci     string
	code    uint64
	source  metadata.AttributeSource
	message string
	// severity replaces the table's when the line itself says how bad it is (NVLink XIDs).
	severity xid.Severity
}

type recentXID struct {
	at      time.Time
	uuid    string
	code    uint64
	source  metadata.AttributeSource
	matched bool
	level   int64
}

// severityLevels maps an XID severity to the gpu_health value it sets: info XIDs are logged
// and counted but leave the GPU healthy.
var severityLevels = map[xid.Severity]int64{
	xid.SeverityInfo:    healthOK,
	xid.SeverityWarning: healthWarning,
	xid.SeverityFatal:   healthFatal,
}

// resolutionAttribute is r as the resolution attribute of metadata.yaml, which declares the
// same values (TestXIDEnumsMatchMetadata).
func resolutionAttribute(r xid.Resolution) metadata.AttributeXidResolution {
	return metadata.MapAttributeXidResolution[string(r)]
}

type healthMark struct {
	at    time.Time
	level int64
}

// xidTracker merges the XID sources, counts each occurrence once and turns it into a log
// record. The NVML event set and the kernel log report most XIDs both: an occurrence from one
// source is the same XID as an unmatched one from the other source on the same GPU with the
// same code within dedup_window. Repeats from one source are always new occurrences.
type xidTracker struct {
	table        xid.Table
	dedupWindow  time.Duration
	healthWindow time.Duration
	clock        clock.Clock
	logger       *zap.Logger
	// resource builds a GPU's (or, for nil, the node's) resource for the log records.
	resource func(*gpuIdentity) pcommon.Resource
	// emit hands the log records to the logs pipeline; nil when there is none.
	emit func(plog.Logs)

	mu     sync.Mutex
	lb     *metadata.LogsBuilder
	recent []recentXID
	counts map[string]map[uint64]int64
	health map[string][]healthMark
}

func (t *xidTracker) add(occ xidOccurrence) {
	now := t.clock.Now()
	info := t.table.Lookup(occ.code)
	if occ.severity != "" {
		info.Severity = occ.severity
	}
	level := severityLevels[info.Severity]
	uuid, index := "", "?"
	if occ.gpu != nil {
		uuid, index = occ.gpu.uuid, strconv.Itoa(occ.gpu.index)
	}

	t.mu.Lock()
	t.recent = slices.DeleteFunc(t.recent, func(r recentXID) bool { return now.Sub(r.at) > t.dedupWindow })
	for i, r := range t.recent {
		if r.matched || r.source == occ.source || r.uuid != uuid || r.code != occ.code {
			continue
		}
		t.recent[i].matched = true
		if level <= r.level {
			t.mu.Unlock()
			return
		}
		// The kernel log says more than NVML's event did (an NVLink XID's verdict): the same
		// occurrence, counted once, at the worse severity.
		if occ.gpu != nil {
			t.health[uuid] = append(t.health[uuid], healthMark{at: now, level: level})
		}
		logs := t.record(now, occ, info, index)
		t.mu.Unlock()
		t.report(occ, info, index, uuid, logs)
		return
	}
	t.recent = append(t.recent, recentXID{at: now, uuid: uuid, code: occ.code, source: occ.source, level: level})
	if occ.gpu != nil {
		if t.counts[uuid] == nil {
			t.counts[uuid] = map[uint64]int64{}
		}
		t.counts[uuid][occ.code]++
		t.health[uuid] = append(t.health[uuid], healthMark{at: now, level: level})
	}
	logs := t.record(now, occ, info, index)
	t.mu.Unlock()
	t.report(occ, info, index, uuid, logs)
}

// report logs an occurrence and hands its log record on.
func (t *xidTracker) report(occ xidOccurrence, info xid.Info, index, uuid string, logs plog.Logs) {
	fields := []zap.Field{zap.Uint64("xid", occ.code), zap.String("gpu", index), zap.String("uuid", uuid), zap.String("pci_bus_id", occ.pci), zap.String("source", occ.source.String()), zap.String("meaning", info.Meaning), zap.String("resolution", string(info.Resolution)), zap.String("action", info.ActionText())}
	if info.Severity == xid.SeverityInfo {
		t.logger.Info("GPU XID error", fields...)
	} else {
		t.logger.Warn("GPU XID error", fields...)
	}
	if t.emit != nil && logs.LogRecordCount() > 0 {
		t.emit(logs)
	}
}

// record builds the log record of one occurrence; mdatagen events carry attributes only, so the
// severity and the readable body are set here.
func (t *xidTracker) record(now time.Time, occ xidOccurrence, info xid.Info, index string) plog.Logs {
	severity := metadata.MapAttributeXidSeverity[string(info.Severity)]
	t.lb.RecordGpuXidEvent(context.Background(), pcommon.NewTimestampFromTime(now), strconv.FormatUint(occ.code, 10), severity, resolutionAttribute(info.Resolution), info.Meaning, info.ActionText(), occ.message, occ.source, occ.pci)
	logs := t.lb.Emit(metadata.WithLogsResource(t.resource(occ.gpu)))
	if logs.LogRecordCount() == 0 {
		return logs
	}
	lr := logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	lr.SetObservedTimestamp(lr.Timestamp())
	switch severity {
	case metadata.AttributeXidSeverityFatal:
		lr.SetSeverityNumber(plog.SeverityNumberError)
	case metadata.AttributeXidSeverityWarning:
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
	default:
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
	}
	lr.SetSeverityText(string(info.Severity))
	lr.Body().SetStr(fmt.Sprintf("XID %d on GPU %s (%s): %s. Action: %s", occ.code, index, occ.pci, info.Meaning, info.ActionText()))
	return logs
}

// countsOf returns a GPU's XID counts by code, in code order.
func (t *xidTracker) countsOf(uuid string) (codes []uint64, counts []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for code := range t.counts[uuid] {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	for _, code := range codes {
		counts = append(counts, t.counts[uuid][code])
	}
	return codes, counts
}

// healthOf is the highest severity of the GPU's XIDs within health_window.
func (t *xidTracker) healthOf(uuid string) int64 {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	marks := slices.DeleteFunc(t.health[uuid], func(m healthMark) bool { return now.Sub(m.at) > t.healthWindow })
	t.health[uuid] = marks
	level := int64(healthOK)
	for _, m := range marks {
		level = max(level, m.level)
	}
	return level
}
