// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNodeCheckInTheAgent runs `make demo`'s configuration with the gpu receiver's node_check on:
// the agent runs the real otelcol-gpu-check (built beside it in bin/) with the receiver's own
// backend settings, at start and every interval, and its page carries the newest verdict. A node
// whose GPUs are faulty from the start fails the check, and the agent's log names them.
func TestNodeCheckInTheAgent(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		name, scenario, pods string
		status               float64
		log                  []string
	}{
		{
			"healthy", filepath.Join(root, "distro", "scenarios", "dgx-a100-demo.yaml"), filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"), 0,
			[]string{"The node check passed"},
		},
		// GPU 4's uncorrected ECC errors and pending row remap, GPU 7's failed remap, from 0 s.
		{
			"faulty", filepath.Join(root, "receiver", "gpureceiver", "testdata", "scenarios", "dgxa100.yaml"), filepath.Join("testdata", "no-pods.yaml"), 1,
			[]string{"The node check did not pass", "GPU 4 (GPU-", "GPU 7 (GPU-"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := time.Now()
			metrics, console := startDemo(t, tc.scenario, tc.pods,
				"receivers::gpu::collection_interval=1s",
				"receivers::gpu::node_check::enabled=true",
				"receivers::gpu::node_check::interval=2s",
			)
			check := func() (status, ended, took float64, err error) {
				families, _, err := scrape(metrics)
				if err != nil {
					return 0, 0, 0, err
				}
				values := map[string]float64{}
				for _, name := range []string{"gpu_node_check_status", "gpu_node_check_timestamp_seconds", "gpu_node_check_duration_seconds"} {
					f := families[name]
					if f == nil || len(f.GetMetric()) != 1 {
						return 0, 0, 0, fmt.Errorf("%s: not one series on the page", name)
					}
					values[name] = f.GetMetric()[0].GetGauge().GetValue()
				}
				return values["gpu_node_check_status"], values["gpu_node_check_timestamp_seconds"], values["gpu_node_check_duration_seconds"], nil
			}
			var first float64
			eventually(t, "the node check's verdict on the page", func() bool {
				status, ended, took, err := check()
				if err != nil {
					return false
				}
				assert.Equal(t, tc.status, status, "the check's exit code")
				assert.GreaterOrEqual(t, ended, float64(started.Unix()), "it ended after the agent started")
				assert.Positive(t, took, "it took some time")
				first = ended
				return true
			})
			eventually(t, "a later run of the check", func() bool {
				status, ended, _, err := check()
				return err == nil && ended > first && status == tc.status
			})
			for _, s := range tc.log {
				assert.Contains(t, console.Output(), s)
			}
			if tc.status != 0 {
				assert.Equal(t, 1, strings.Count(console.Output(), "The node check did not pass"), "the same verdict is logged once (again at debug)")
			}
		})
	}
}
