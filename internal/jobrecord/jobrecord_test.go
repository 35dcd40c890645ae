// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecord

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

func TestRoundTrip(t *testing.T) {
	end := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for _, r := range []Record{
		{
			Job: map[string]string{"job_name": "a~b"}, User: "a", Start: end.Add(-time.Hour), End: end,
			GPUs:      []GPU{{NodeName: "n", UUID: "GPU-1", MinorNumber: "0", MIGUUID: "MIG-1", Model: "M", HeldHours: 1, AllocatedHours: 0.25, EnergyJoules: 5}},
			HeldHours: 1, AllocatedHours: 0.25, Verdict: VerdictUnknown,
		},
		{
			Job: map[string]string{"job_name": "c"}, User: "c", Start: end, End: end,
			SMActiveHours: new(float64), XIDs: map[string]int64{"48": 2}, ThrottleReasons: map[string]float64{"hw_thermal": 30},
			ECCDoubleBit: 1, Verdict: VerdictIdle,
		},
	} {
		lr := plog.NewLogRecord()
		r.ToLogRecord(lr)
		assert.Equal(t, EventName, lr.EventName())
		assert.Equal(t, end, lr.Timestamp().AsTime())
		got, err := FromLogRecord(lr)
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
}

func TestFromLogRecordNamesWhatIsWrong(t *testing.T) {
	lr := plog.NewLogRecord()
	_, err := FromLogRecord(lr)
	require.ErrorContains(t, err, `event name "", not "gpu.job.record"`)
	r := Record{Job: map[string]string{}, End: time.Unix(0, 0)}
	r.ToLogRecord(lr)
	lr.Attributes().PutStr("energy_joules", "lots")
	lr.Attributes().PutStr("start", "yesterday")
	lr.Attributes().PutEmptySlice("gpus").AppendEmpty().SetStr("GPU-1")
	_, err = FromLogRecord(lr)
	require.ErrorContains(t, err, `attribute "energy_joules": missing or not a number`)
	require.ErrorContains(t, err, `attribute "start": parsing time "yesterday"`)
	require.ErrorContains(t, err, `attribute "gpus[0]": missing or not a map`)
}

func TestVerdict(t *testing.T) {
	pct := func(v float64) *float64 { return &v }
	for _, tt := range []struct {
		eff, sm *float64
		want    string
	}{
		{nil, nil, VerdictUnknown},
		{pct(5), nil, VerdictIdle},
		{pct(50), pct(10), VerdictUnderused},
		{pct(90), nil, VerdictBusy},
		{pct(90), pct(40), VerdictBusy},
		{pct(90), pct(20), VerdictBusyInefficient},
	} {
		assert.Equal(t, tt.want, Verdict(tt.eff, tt.sm, 10, 80, 30))
	}
}
