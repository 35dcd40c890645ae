// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package jobrecordconnector

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

// BenchmarkConsume adds one node's collection (the attribution's kubelet.yaml batch: 7 jobs on
// 8 GPUs, with the GPUs' own series) to 1,000 nodes' running totals, and reports the size of
// the checkpoint those totals make.
func BenchmarkConsume(b *testing.B) {
	clk := clock.NewFake(t0)
	c, _ := newTestRecorder(b, testConfig(), clk)
	batch := kubeletBatch(b)
	const nodes = 1000
	for n := range nodes {
		node := fmt.Sprintf("gpu-node-%04d", n)
		consume(b, c, gpuSeries(t0, kubeletNodeGPUs(node, 0)...))
		consume(b, c, at(onNode(batch, node), t0))
	}
	node := onNode(batch, "gpu-node-0000")
	gpus := kubeletNodeGPUs("gpu-node-0000", 1)
	b.ResetTimer()
	for i := range b.N {
		ts := t0.Add(time.Duration(i+1) * interval)
		consume(b, c, gpuSeries(ts, gpus...))
		consume(b, c, at(node, ts))
	}
	b.StopTimer()
	data, err := json.Marshal(c.totals)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data))/nodes, "checkpoint-bytes/node")
}
