// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestAgentOmitsCloudDetectors checks distro/omitdetectors: the agent is built with the five
// cloud resource detectors of the collector's telemetry replaced, and a configuration that asks
// for one of them stops at start-up with an error naming it instead of running without it.
func TestAgentOmitsCloudDetectors(t *testing.T) {
	agent := stack.AgentBinary(t)
	info, err := buildinfo.ReadFile(agent)
	require.NoError(t, err)
	replaced := map[string]string{}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			replaced[dep.Path] = dep.Replace.Path
		}
	}
	detectors := map[string]string{
		"aws.ec2":  "go.opentelemetry.io/contrib/detectors/aws/ec2/v2",
		"aws.ecs":  "go.opentelemetry.io/contrib/detectors/aws/ecs",
		"aws.eks":  "go.opentelemetry.io/contrib/detectors/aws/eks",
		"azure.vm": "go.opentelemetry.io/contrib/detectors/azure/azurevm",
		"gcp":      "go.opentelemetry.io/contrib/detectors/gcp",
	}
	for name, module := range detectors {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, replaced[module], "omitdetectors", "%s is replaced in the agent's build", module)

			config := filepath.Join(t.TempDir(), "detection.yaml")
			require.NoError(t, os.WriteFile(config, fmt.Appendf(nil,
				"service:\n  telemetry:\n    resource:\n      detection/development:\n        detectors:\n          - %s: {}\n", name), 0o600))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, agent, "--config", filepath.Join(repoRoot(t), "distro", "local.yaml"), "--config", config,
				"--set", fmt.Sprintf("exporters::prometheus_page::endpoint=127.0.0.1:%d", stack.FreePort(t)),
				"--set", fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", stack.FreePort(t)))
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the agent must not start: %s", out)
			require.NoError(t, ctx.Err(), "the agent did not stop within a minute: %s", out)
			assert.Contains(t, string(out), "the "+name+" resource detector is not built into otelcol-gpu-agent")
		})
	}
}
