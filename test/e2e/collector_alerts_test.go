// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestEdgeQueueAlerts runs make demo's collector as an edge agent whose gateway cannot be
// reached (its otlp exporter points at a closed port, with a queue of 60 requests) and has
// Prometheus scrape its self-telemetry under the job name collector.yaml expects: the agent is
// up, and the queue alerts are raised on the collector's own metric names and labels.
func TestEdgeQueueAlerts(t *testing.T) {
	root := repoRoot(t)
	telemetry, closed := stack.FreePort(t), stack.FreePort(t)
	startDemo(t, filepath.Join(root, "distro", "scenarios", "dgx-a100-demo.yaml"),
		filepath.Join(root, "distro", "scenarios", "pods", "dgx-a100-demo.yaml"),
		"receivers::gpu::collection_interval=1s",
		"receivers::task::collection_interval=1s",
		fmt.Sprintf("exporters::otlp/gateway::endpoint=127.0.0.1:%d", closed),
		"exporters::otlp/gateway::tls::insecure=true",
		// 60 requests, two a second: full in about 30 s, so Prometheus sees it grow first.
		"exporters::otlp/gateway::sending_queue::queue_size=60",
		"service::pipelines::metrics/gateway::receivers=[gpu, task]",
		"service::pipelines::metrics/gateway::processors=[memory_limiter]",
		"service::pipelines::metrics/gateway::exporters=[otlp/gateway]",
		"service::telemetry::metrics::level=detailed",
		fmt.Sprintf("service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", telemetry),
	)
	rules := filepath.Join(root, "deploy", "prometheus", "rules", "collector.yaml")
	api := startPrometheus(t, map[string]string{"otelcol-gpu-agent": fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry)}, rules)

	eventually(t, "the agent's telemetry scraped", func() bool {
		return series(t, api, `otelcol_gpu:agent:up == 1`) == 1
	})
	for _, alert := range []string{"OtelcolExporterQueueGrowing", "OtelcolExporterQueueNearlyFull"} {
		q := fmt.Sprintf(`ALERTS{alertname=%q, alertstate="pending", exporter="otlp/gateway", data_type="metrics", job="otelcol-gpu-agent"}`, alert)
		eventually(t, alert, func() bool { return series(t, api, q) == 1 })
	}
}
