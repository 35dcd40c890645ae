// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFleetWeeksAndEscalation: a period of ten days is two weeks counted back from its end (the
// first three days long); a quarantine whose action escalates within it is one quarantine, counted
// at its last action; stretches are summed per pool and the longest unhealthy one kept; faults are
// counted in the week they came; a node without gpu_info is in the pool "unknown".
func TestFleetWeeksAndEscalation(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{Start: start, End: start.Add(10 * 24 * time.Hour), MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1}
	at := func(h float64) int64 { return start.Add(time.Duration(h * float64(time.Hour))).UnixMilli() }
	// state is a 0/1 series every minute over [0, 240 h), 1 within the given [from, to) hours.
	state := func(on [][2]float64, labels model.Metric) series {
		s := series{labels: labels}
		for m := range 240 * 60 {
			h, v := float64(m)/60, 0.0
			for _, o := range on {
				if h >= o[0] && h < o[1] {
					v = 1
				}
			}
			s.samples = append(s.samples, sample{at(h), v})
		}
		return s
	}
	// held is a series that exists only while its state holds, as the by-action rule's.
	held := func(from, to float64, labels model.Metric) series {
		s := series{labels: labels}
		for m := int(from * 60); m < int(to*60); m++ {
			s.samples = append(s.samples, sample{at(float64(m) / 60), 1})
		}
		return s
	}
	n1 := model.Metric{"node_name": "n1"}
	n2 := model.Metric{"node_name": "n2"}
	with := func(l model.Metric, k, v string) model.Metric {
		c := l.Clone()
		c[model.LabelName(k)] = model.LabelValue(v)
		return c
	}
	in := fleetInputs{
		// n1: unhealthy 10–12 h (first week), then 100–110 h (second week: from 72 h).
		outOfService: []series{state([][2]float64{{10, 12.5}, {100, 110}}, n1), state(nil, n2)},
		unhealthy:    []series{state([][2]float64{{10, 12}, {100, 110}}, n1), state(nil, n2)},
		quarantined:  []series{state([][2]float64{{100, 110}}, n1), state(nil, n2)},
		validation:   []series{state([][2]float64{{12, 12.5}}, n1), state(nil, n2)},
		// One quarantine from 100 h: reset_gpu for 1 h, then reboot (escalated) until 110 h.
		byAction: []series{held(100, 101, with(n1, "action", "reset_gpu")), held(101, 110, with(n1, "action", "reboot"))},
		gpuHealthy: []series{
			state([][2]float64{{0, 10}, {12, 100}, {110, 240}}, with(with(n1, "minor_number", "0"), "uuid", "GPU-0")),
			state([][2]float64{{0, 240}}, with(with(n2, "minor_number", "0"), "uuid", "GPU-1")),
		},
		faults: []series{{with(n1, "fault", "xid"), []sample{{at(10), 1}, {at(50), 1}, {at(100), 2}, {at(200), 2}}}},
	}
	a := newFleetAcc(o)
	a.add(in)
	rows := a.report(map[string]string{"n1": "A100"})
	require.Len(t, rows, 4)
	first, second := rows[0], rows[2]
	assert.Equal(t, start, first.WeekStart)
	assert.Equal(t, start.Add(72*time.Hour), first.WeekEnd)
	assert.Equal(t, start.Add(72*time.Hour), second.WeekStart)
	assert.Equal(t, "A100", first.Pool)
	assert.Equal(t, "unknown", rows[1].Pool)

	assert.Equal(t, 1.0, first.Faults)
	assert.InDelta(t, 2, first.UnhealthyHours, 1e-9)
	assert.InDelta(t, 2, first.MaxTimeToRepairHours, 1e-9)
	assert.InDelta(t, 0.5, first.ValidationHours, 1e-9)
	assert.InDelta(t, 1-2.5/72, float64(first.NodeAvailability), 1e-9)
	assert.InDelta(t, 72-2.5, float64(first.MeanTimeBetweenFaultsHours), 1e-9)
	assert.Empty(t, first.Quarantines)

	assert.Equal(t, 1.0, second.Faults)
	assert.InDelta(t, 10, second.UnhealthyHours, 1e-9)
	assert.InDelta(t, 10, float64(second.MeanTimeToRepairHours), 1e-9)
	assert.InDelta(t, 10, second.MaxTimeToRepairHours, 1e-9)
	assert.InDelta(t, 10, second.QuarantinedHours, 1e-9)
	assert.Equal(t, map[string]float64{"reset_gpu": 1, "reboot": 9}, second.QuarantinedHoursByAction)
	assert.Equal(t, map[string]int{"reboot": 1}, second.Quarantines, "an escalation within a quarantine is one quarantine")
	assert.InDelta(t, 1-10.0/168, float64(second.GPUAvailability), 1e-9)

	clean := rows[3]
	assert.Equal(t, 1, clean.GPUs)
	assert.Zero(t, clean.Faults)
	assert.True(t, math.IsNaN(float64(clean.MeanTimeToRepairHours)))
	assert.Equal(t, 1.0, float64(clean.NodeAvailability))
	assert.Equal(t, 1.0, float64(clean.GPUAvailability))
}
