// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// BenchmarkCompute computes a week of 100 GPUs scraped every 30 s (task, framebuffer, device
// utilization and gpu_up: 8 M samples), as fetched; it reports the cost per sample.
func BenchmarkCompute(b *testing.B) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	o := Options{
		Start: start, End: start.Add(7 * 24 * time.Hour), MaxGap: 5 * time.Minute,
		IdleBelow: 10, IdleHeldUtilBelow: 1, IdleHeldMemoryAtLeast: 1, Bucket: time.Hour, Chunk: 6 * time.Hour,
	}
	const gpus = 100
	n := int(o.End.Sub(o.Start) / (30 * time.Second))
	gen := func(v func(i int) float64) []sample {
		out := make([]sample, n)
		for i := range out {
			out[i] = sample{start.Add(time.Duration(i) * 30 * time.Second).UnixMilli(), v(i)}
		}
		return out
	}
	var in inputs
	for g := range gpus {
		gpu := model.Metric{"node_name": model.LabelValue(fmt.Sprintf("node-%d", g/8)), "minor_number": model.LabelValue(fmt.Sprint(g % 8)), "uuid": model.LabelValue(fmt.Sprintf("GPU-%d", g))}
		task := gpu.Clone()
		task["job_name"], task["username"], task["virtual_cluster"] = model.LabelValue(fmt.Sprintf("job-%d", g/4)), model.LabelValue(fmt.Sprintf("user-%d", g%7)), "vc"
		util := func(i int) float64 { return float64((i*7 + g) % 101) }
		in.taskUtil = append(in.taskUtil, series{task, gen(util)})
		in.taskMem = append(in.taskMem, series{task, gen(func(int) float64 { return 40 })})
		in.gpuUtil = append(in.gpuUtil, series{gpu, gen(util)})
		in.gpuUp = append(in.gpuUp, series{gpu, gen(func(int) float64 { return 1 })})
	}
	samples := 4 * gpus * n
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		compute(in, o)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}
