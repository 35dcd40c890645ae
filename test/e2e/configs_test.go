// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestShippedConfigsValidate checks every configuration in distro/ with the collector's own
// `validate` command, as a user's first start would. Paths that only exist on a Kubernetes node
// are pointed at this machine.
func TestShippedConfigsValidate(t *testing.T) {
	root := repoRoot(t)
	env := []string{
		"MY_POD_IP=127.0.0.1", "MY_POD_NAMESPACE=otelcol-gpu", "K8S_NODE_NAME=node-1", "K8S_NODE_IP=10.0.0.1", "OTELCOL_GPU_GATEWAY=127.0.0.1",
		// demo.yaml, demo-dcgm.yaml, demo-amd.yaml and demo-slurm.yaml read the node cmd/demonode writes; any host tree will do for validation.
		"OTELCOL_GPU_DEMO_ROOT=" + filepath.Join(root, "receiver", "taskreceiver", "testdata", "hosts", "v2-systemd-crio"),
	}
	for name, sets := range map[string][]string{
		"local.yaml":        nil,
		"demo.yaml":         nil,
		"demo-dcgm.yaml":    nil,
		"demo-amd.yaml":     nil,
		"demo-slurm.yaml":   nil,
		"semconv-otlp.yaml": nil,
		"gateway.yaml":      nil,
		"agent.yaml": {
			"receivers::task::root_path=/",
			"processors::gpu_attribution::root_path=/",
			"extensions::file_storage/queue::directory=" + filepath.Join(t.TempDir(), "queue"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			config := filepath.Join(root, "distro", name)
			args := []string{"validate", "--config", config}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			cmd := exec.Command(stack.BinaryFor(t, config), args...)
			cmd.Dir = root // demo.yaml names its scenario relative to the repository
			cmd.Env = append(cmd.Environ(), env...)
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "%s", out)
		})
	}
	t.Run("agent distribution without the gateway's components", func(t *testing.T) {
		// The check can fail: the agent's build links only what the agent's configurations use.
		cmd := exec.Command(stack.AgentBinary(t), "validate", "--config", filepath.Join(root, "distro", "gateway.yaml"))
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		assert.Error(t, err)
		// The collector names the first unknown receiver it decodes, in map order: either of the
		// gateway's two.
		assert.Regexp(t, `'receivers' unknown type: "(k8s_watchdog|otlp)"`, string(out))
	})
}
