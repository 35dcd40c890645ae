// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestXIDsOfOneCodeAcrossSeries(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{Start: start, End: start.Add(time.Hour), MaxGap: 5 * time.Minute, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1}
	at := func(m time.Duration) int64 { return start.Add(m * time.Minute).UnixMilli() }
	gpu := func(instance string, kv ...string) model.Metric {
		l := model.Metric{"node_name": "n1", "minor_number": "0", "uuid": "GPU-0", "instance": model.LabelValue(instance)}
		for i := 0; i+1 < len(kv); i += 2 {
			l[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return l
	}
	in := inputs{xid: []series{
		// The agent moved to another port: a second series of the same GPU and code.
		{gpu("10.0.0.1:9102", "xid", "79"), []sample{{at(10), 1}, {at(11), 1}}},
		{gpu("10.0.0.1:9103", "xid", "79"), []sample{{at(30), 2}}},
		// A site that calls XID 13 reset_gpu: its own row, with that class's action.
		{gpu("10.0.0.1:9102", "xid", "13", "resolution", "reset_gpu"), []sample{{at(5), 1}}},
	}}
	r := compute(in, o)
	require.Len(t, r.GPUs, 1)
	assert.Equal(t, []XIDCount{
		{
			Code: "13", Count: 1, Resolution: "reset_gpu", Severity: "warning", Meaning: "Graphics engine exception",
			Action: "drain the GPU's jobs and reset the GPU (or reboot the node)",
		},
		{
			Code: "79", Count: 3, Resolution: "reboot", Severity: "fatal", Meaning: "GPU has fallen off the bus",
			Action: "drain the node, reboot it, and inspect the hardware if the XID comes back",
		},
	}, r.GPUs[0].XIDs)
	assert.Equal(t, 4.0, r.Summary.XIDs)
	assert.Equal(t, 1, r.Summary.GPUsWithErrors)
}
