// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// collect is one collection of the gpu receiver on n1 at data time at: each GPU's health
// (nil: healthy), then the node's GPU count.
func collect(j *judge, at time.Time, detected, configured int64, gpus map[int]map[string]int64) {
	for minor, levels := range gpus {
		g := gpuOn("n1", minor)
		if levels == nil {
			j.consumeMetrics(g.healthy(at))
		} else {
			j.consumeMetrics(g.health(at, levels))
		}
	}
	j.consumeMetrics(gpuCountOf("n1", at, detected, configured))
}

// withoutCheck is the gate without validation::require_check: the collections alone.
func withoutCheck(cfg *Config) { cfg.Validation.RequireCheck = false }

func TestValidationPasses(t *testing.T) {
	j, clk := testJudge(t, withoutCheck)
	healthy := map[int]map[string]int64{0: nil, 1: nil}
	since := t0.Add(-time.Second)

	passed, why := j.validated("n1", since)
	assert.False(t, passed)
	assert.Equal(t, "its agent has reported no GPU health yet", why)

	for i := range 2 {
		collect(j, t0.Add(time.Duration(i)*10*time.Second), 2, 2, healthy)
	}
	passed, why = j.validated("n1", since)
	assert.False(t, passed, "two passes of three")
	assert.Equal(t, "2 of 3 healthy collections in a row so far", why)
	j.consumeMetrics(gpuOn("n1", 0).healthy(t0.Add(20 * time.Second)))
	j.consumeMetrics(gpuOn("n1", 1).healthy(t0.Add(20 * time.Second)))
	assert.Equal(t, []string{"n1"}, j.consumeMetrics(gpuCountOf("n1", t0.Add(20*time.Second), 2, 2)), "the third pass: the gate looks at once")
	passed, _ = j.validated("n1", since)
	assert.True(t, passed)
	passed, why = j.validated("n1", t0.Add(10*time.Second))
	assert.False(t, passed, "passes before the gate began do not count (a node the quarantine returns)")
	assert.Equal(t, "1 of 3 healthy collections in a row so far", why)

	// One condition not ok ends the run at once, and three passes are needed again.
	clk.Advance(30 * time.Second)
	j.consumeMetrics(gpuOn("n1", 1).health(t0.Add(30*time.Second), map[string]int64{"memory_ecc": 1}))
	passed, why = j.validated("n1", since)
	assert.False(t, passed)
	assert.Equal(t, `0 of 3 healthy collections in a row so far; the last failure: GPU 1 (GPU-n1-1): gpu_health{condition="memory_ecc"} is 1`, why)
	collect(j, t0.Add(30*time.Second), 2, 2, nil)
	passed, _ = j.validated("n1", since)
	assert.False(t, passed, "the GPU's newest health is still not ok")
	for i := 4; i < 7; i++ {
		collect(j, t0.Add(time.Duration(i)*10*time.Second), 2, 2, healthy)
	}
	passed, _ = j.validated("n1", since)
	assert.True(t, passed)
}

func TestValidationFailures(t *testing.T) {
	healthy := map[int]map[string]int64{0: nil, 1: nil}
	for _, c := range []struct {
		name                 string
		detected, configured int64
		gpus                 map[int]map[string]int64
		xid                  bool
		want                 string
	}{
		{"a GPU missing", 1, 2, healthy, false, "1 GPUs detected, 2 configured"},
		{"no configured count", 2, -1, healthy, false, "the agent reports no configured_gpu_count (the gpu receiver's configured_gpu_count): without it no collection can show that every GPU is there"},
		{"a GPU silent", 2, 2, map[int]map[string]int64{0: nil}, false, "1 of the 2 GPUs detected reported their health"},
		{"a thermal slowdown", 2, 2, map[int]map[string]int64{0: nil, 1: {"thermal": 1}}, false, `GPU 1 (GPU-n1-1): gpu_health{condition="thermal"} is 1`},
		{"an XID open", 2, 2, healthy, true, "GPU 0 (GPU-n1-0): XID 79, meaning of 79"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _ := testJudge(t, func(cfg *Config) { cfg.Validation.Passes, cfg.Validation.RequireCheck = 1, false })
			if c.xid {
				j.consumeLogs(gpuOn("n1", 0).xids(t0.Add(-time.Second), 79, "reboot", "fatal", 1))
			}
			collect(j, t0, c.detected, c.configured, c.gpus)
			passed, why := j.validated("n1", t0.Add(-time.Minute))
			assert.False(t, passed)
			assert.Equal(t, "0 of 1 healthy collections in a row so far; the last failure: "+c.want, why)
		})
	}
}

func TestValidationReadsFreshDataOnly(t *testing.T) {
	j, _ := testJudge(t, func(cfg *Config) { cfg.Validation.Passes, cfg.Validation.RequireCheck = 1, false })
	healthy := map[int]map[string]int64{0: nil}
	collect(j, t0.Add(-time.Hour), 1, 1, healthy)
	passed, _ := j.validated("n1", t0.Add(-2*time.Hour))
	assert.False(t, passed, "a backlog passes nothing")
	collect(j, t0, 1, 1, healthy)
	collect(j, t0.Add(-time.Second), 1, 0, healthy)
	passed, _ = j.validated("n1", t0.Add(-2*time.Hour))
	assert.True(t, passed, "a collection older than the newest changes nothing")

	// A GPU replaced: the old one, silent for max_data_age, is forgotten.
	j.consumeMetrics(gpuOn("n1", 9).healthy(t0))
	collect(j, t0.Add(11*time.Minute), 1, 1, healthy)
	j.mu.Lock()
	assert.Len(t, j.nodes["n1"].validation.gpus, 1)
	j.mu.Unlock()
}

// TestValidationWaitsForTheCheck: with validation::require_check, healthy collections are not
// enough: the newest run of otelcol-gpu-check must have ended after the gate began and passed.
func TestValidationWaitsForTheCheck(t *testing.T) {
	j, _ := testJudge(t, func(cfg *Config) { cfg.Validation.Passes = 1 })
	since := t0.Add(-time.Minute)
	collect(j, t0, 1, 1, map[int]map[string]int64{0: nil})
	passed, why := j.validated("n1", since)
	assert.False(t, passed)
	assert.Equal(t, "its agent has reported no run of otelcol-gpu-check (the gpu receiver's node_check)", why)

	j.consumeMetrics(nodeCheckOf("n1", t0, 0, since.Add(-time.Second))) // passed, but before the gate began
	_, why = j.validated("n1", since)
	assert.Equal(t, "otelcol-gpu-check has not run since the gate began holding the node (its newest run ended at 2026-12-01T11:58:59Z)", why)

	assert.Empty(t, j.consumeMetrics(nodeCheckOf("n1", t0, 1, t0)), "a run that failed")
	_, why = j.validated("n1", since)
	assert.Equal(t, "otelcol-gpu-check's newest run (ended at 2026-12-01T12:00:00Z) found the node unhealthy (its findings are in the agent's log)", why)
	j.consumeMetrics(nodeCheckOf("n1", t0, 2, t0.Add(time.Second)))
	_, why = j.validated("n1", since)
	assert.Equal(t, "otelcol-gpu-check's newest run (ended at 2026-12-01T12:00:01Z) could not check the node (status 2; the reason is in the agent's log)", why)

	assert.Equal(t, []string{"n1"}, j.consumeMetrics(nodeCheckOf("n1", t0, 0, t0.Add(2*time.Second))), "a passing run: the gate looks at once")
	passed, why = j.validated("n1", since)
	assert.True(t, passed, why)
	assert.Empty(t, j.consumeMetrics(nodeCheckOf("n1", t0, 0, t0.Add(2*time.Second))), "the same run, reported at the next collection")
	j.consumeMetrics(nodeCheckOf("n1", t0, 1, t0.Add(time.Second)))
	passed, _ = j.validated("n1", since)
	assert.True(t, passed, "an older run replayed changes nothing")

	// Both wanted: a failing collection says so beside the check.
	j.consumeMetrics(gpuOn("n1", 0).health(t0.Add(10*time.Second), map[string]int64{"pcie": 1}))
	j.consumeMetrics(nodeCheckOf("n1", t0, 1, t0.Add(3*time.Second)))
	_, why = j.validated("n1", since)
	assert.Equal(t, `0 of 1 healthy collections in a row so far; the last failure: GPU 0 (GPU-n1-0): gpu_health{condition="pcie"} is 1; `+
		"otelcol-gpu-check's newest run (ended at 2026-12-01T12:00:03Z) found the node unhealthy (its findings are in the agent's log)", why)
}

// TestGateTaints: the gate takes out its own taint only, and every other taint stays exactly
// as it was.
func TestGateTaints(t *testing.T) {
	g := newGate(&createDefaultConfig().(*Config).Validation)
	added := metav1.NewTime(t0)
	theirs := []corev1.Taint{
		{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
		{Key: ValidationTaintKey, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}, // same key, another effect: not the gate's
		{Key: TaintKey, Value: "reboot", Effect: corev1.TaintEffectNoSchedule},
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: append(theirs[:1:1], append([]corev1.Taint{{Key: ValidationTaintKey, Effect: corev1.TaintEffectNoSchedule}}, theirs[1:]...)...)}}
	assert.Equal(t, &corev1.Taint{Key: ValidationTaintKey, Effect: corev1.TaintEffectNoSchedule}, g.taint(node))
	assert.Equal(t, theirs, g.withoutTaint(node.Spec.Taints))
	assert.Len(t, node.Spec.Taints, 4, "the node's own list is left as it is")
	assert.Equal(t, append(theirs, corev1.Taint{Key: ValidationTaintKey, Effect: corev1.TaintEffectNoSchedule}), g.withTaint(node.Spec.Taints), "once")
	assert.Nil(t, g.taint(&corev1.Node{Spec: corev1.NodeSpec{Taints: theirs}}))
}
