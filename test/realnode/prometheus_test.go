// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// prometheusRBAC is what deploy/README.md says Prometheus's account needs: get, list and watch
// on pods in otelcol-gpu.
const prometheusRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: prometheus, namespace: otelcol-gpu}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: prometheus, namespace: otelcol-gpu}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: prometheus}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: prometheus}
`

// prometheusConfig is deploy/prometheus/scrape-configs.yaml's jobs with what a Prometheus
// outside the cluster adds to each kubernetes_sd_configs entry (the API server, its CA and a
// token), and the rule files of deploy/prometheus/rules.
func prometheusConfig(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stack.RepoRoot(), "deploy", "prometheus", "scrape-configs.yaml"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte(node.Token("prometheus")), 0o600))
	jobs := cfg["scrape_configs"].([]any)
	require.Len(t, jobs, 3, "the shipped jobs")
	for _, job := range jobs {
		for _, sd := range job.(map[string]any)["kubernetes_sd_configs"].([]any) {
			sd := sd.(map[string]any)
			sd["api_server"] = realnode.APIServer
			sd["tls_config"] = map[string]any{"ca_file": node.CA()}
			sd["authorization"] = map[string]any{"credentials_file": token}
		}
	}
	// Collected every 10 s, so a scrape every 5 s and rules evaluated as often.
	cfg["global"] = map[string]any{"scrape_interval": "5s", "evaluation_interval": "5s"}
	cfg["rule_files"] = []string{filepath.Join(stack.RepoRoot(), "deploy", "prometheus", "rules", "*.yaml")}
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// startPrometheus runs Prometheus 3 in the node's network, where it reaches the API server and
// the pods as a cluster's Prometheus does; it is stopped when the test ends.
func startPrometheus(t *testing.T) string {
	t.Helper()
	out, err := node.Kubectl([]byte(prometheusRBAC), "apply", "-f", "-")
	require.NoError(t, err, out)
	dir := t.TempDir()
	cmd := node.Command(stack.Built(t, "PROMETHEUS_BIN", "test/prometheus/build.sh"), "--config.file="+prometheusConfig(t, dir), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:9090")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("Prometheus's log:\n%s", data)
		}
	})
	return "http://127.0.0.1:9090"
}

// promQuery runs an instant query; the series' label sets, or an error.
func promQuery(api, q string) ([]map[string]string, error) {
	resp, err := node.HTTP.Get(api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, body.Error)
	}
	var out []map[string]string
	for _, r := range body.Data.Result {
		out = append(out, r.Metric)
	}
	return out, nil
}

// testPrometheus: a Prometheus 3 with the shipped scrape jobs discovers the agent and the
// gateway through the API server and scrapes them, and the scenario's XID fires its alert with
// the labels the rules promise (the node, the GPU, the job of the cluster's page).
func testPrometheus(t *testing.T) {
	api := startPrometheus(t)
	agent := agentPod(t).Name
	expect := map[string]string{
		// The gateway's page: the contract for the whole cluster, the node's series under its
		// own instance (honor_labels).
		"otelcol-gpu": fmt.Sprintf(`gpu_utilization{job="otelcol-gpu", instance=%q, node_name=%q, uuid=%q}`, realnode.NodeIP+":9102", realnode.NodeName, gpus[0].UUID),
		// The collectors' own telemetry, each target labeled with its node and pod.
		"otelcol-gpu-agent":   fmt.Sprintf(`otelcol_gpu:agent:up{job="otelcol-gpu-agent", node_name=%q, pod=%q} == 1`, realnode.NodeName, agent),
		"otelcol-gpu-gateway": fmt.Sprintf(`otelcol_gpu:gateway:up{job="otelcol-gpu-gateway", node_name=%q} == 1`, realnode.NodeName),
		// The XID the scenario raises 30 s after the agent started: a GPU reset is needed.
		"alert": fmt.Sprintf(`ALERTS{alertname="GpuXidResetRequired", alertstate="firing", severity="critical", job="otelcol-gpu", instance=%q, node_name=%q, minor_number="1", uuid=%q, xid="48", resolution="reset_gpu"}`,
			realnode.NodeIP+":9102", realnode.NodeName, gpus[1].UUID),
	}
	for what, q := range expect {
		var got []map[string]string
		if err := poll.For(waitFor, func() error {
			var err error
			if got, err = promQuery(api, q); err == nil && len(got) == 0 {
				err = errors.New("no series")
			}
			return err
		}); err != nil {
			t.Fatalf("waited %s for %s: %s: %v; targets:\n%s", waitFor, what, q, err, targets(api))
		}
		assert.Len(t, got, 1, "%s: %s", what, q)
	}
}

// targets is Prometheus's view of its targets, for a failure's message.
func targets(api string) string {
	resp, err := node.HTTP.Get(api + "/api/v1/targets")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string            `json:"scrapePool"`
				ScrapeURL  string            `json:"scrapeUrl"`
				Health     string            `json:"health"`
				LastError  string            `json:"lastError"`
				Labels     map[string]string `json:"labels"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, tg := range body.Data.ActiveTargets {
		fmt.Fprintf(&b, "%s %s %s %s %v\n", tg.ScrapePool, tg.ScrapeURL, tg.Health, tg.LastError, tg.Labels)
	}
	return b.String()
}
