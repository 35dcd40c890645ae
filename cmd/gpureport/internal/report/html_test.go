// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPageListsNotableGPUsAndEscapes(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	r := &Report{
		Start: start, End: start.Add(time.Hour), BucketSeconds: 3600,
		Jobs: []Usage{{Name: `<script>alert("x")</script>`, HeldHours: 1}},
		GPUs: []GPU{
			{Node: "n1", MinorNumber: "0", UUID: "GPU-quiet", AvailableHours: 1},
			{Node: "n1", MinorNumber: "1", UUID: "GPU-lost", UnavailableHours: 0.5, AvailableHours: 0.5},
		},
	}
	page, err := renderHTML(r)
	require.NoError(t, err)
	html := string(page)
	assert.Contains(t, html, "GPU-lost")
	assert.NotContains(t, html, "GPU-quiet")
	assert.Contains(t, html, "The 1 other GPUs had none of these")
	assert.NotContains(t, html, "<script>", "label values are escaped")
	assert.Contains(t, html, "&lt;script&gt;")
	assert.False(t, strings.Contains(html, "http://") || strings.Contains(html, "https://"), "the page requests nothing")
}

func TestPageOfOneBucketAndOneNode(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{
		Start: start, End: start.Add(time.Hour), MaxGap: 5 * time.Minute, IdleBelow: 10,
		IdleHeldUtilBelow: 1, IdleHeldMemoryAtLeast: 1, Bucket: time.Hour, Chunk: time.Hour, NodesPerQuery: 1,
	}
	labels := model.Metric{"node_name": "n1", "minor_number": "0", "uuid": "GPU-0", "job_name": "j", "username": "u"}
	var samples []sample
	for m := range 61 {
		samples = append(samples, sample{start.Add(time.Duration(m) * time.Minute).UnixMilli(), float64(m % 3)})
	}
	r := compute(inputs{taskUtil: []series{{labels, samples}}, gpuUtil: []series{{labels, samples}}}, o)
	page, err := renderHTML(r)
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(page), "data:image/png;base64,"), "job, idle and heat map charts, and the scale")
}
