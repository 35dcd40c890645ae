// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// fixtureHost is a node with jobs, services and processes, for agents that play a node.
func fixtureHost(tb testing.TB) string {
	return filepath.Join(repoRoot(tb), "receiver", "taskreceiver", "testdata", "hosts", "v1-systemd-containerd")
}

// agentOptions plays node name at ip on the fixture host, collecting every second.
func agentOptions(tb testing.TB, gateway *stack.Gateway, name, ip string) stack.AgentOptions {
	return stack.AgentOptions{
		NodeName: name, NodeIP: ip, RootPath: fixtureHost(tb), Gateway: gateway.OTLP,
		Sets: []string{
			"receivers::task::collection_interval=1s",
			"receivers::gpu::collection_interval=1s",
			"receivers::task::service_namespaces=[pai]",
		},
	}
}

func waitHealthy(tb testing.TB, what, healthURL string) {
	tb.Helper()
	eventually(tb, what+" to be healthy", func() bool {
		_, err := httpGet(healthURL)
		return err == nil
	})
}

// TestGatewayRejectsUnauthenticated sends OTLP to the gateway as distro/gateway.yaml ships it,
// from a client that trusts its CA: only a request over TLS with the agents' token is accepted.
// Each request carries its case's name; the gateway's page must show only the accepted one.
func TestGatewayRejectsUnauthenticated(t *testing.T) {
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets)
	waitHealthy(t, "the gateway", gateway.Health)

	trusting := credentials.NewTLS(&tls.Config{RootCAs: secrets.CA, MinVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		name   string
		creds  credentials.TransportCredentials
		token  string // "" sends no authorization header
		reject codes.Code
	}{
		{"tls-and-token", trusting, secrets.Token, codes.OK},
		{"no-token", trusting, "", codes.Unauthenticated},
		{"wrong-token", trusting, strings.Repeat("0", len(secrets.Token)), codes.Unauthenticated},
		{"plain-text", insecure.NewCredentials(), secrets.Token, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := exportProbe(t, gateway.OTLP, tc.creds, tc.token, tc.name)
			assert.Equal(t, tc.reject, status.Code(err), "export error: %v", err)
		})
	}

	var page string
	eventually(t, "the accepted probe on the gateway's page", func() bool {
		body, err := httpGet(gateway.Metrics)
		page = string(body)
		return err == nil && strings.Contains(page, `client="tls-and-token"`)
	})
	for _, rejected := range []string{"no-token", "wrong-token", "plain-text"} {
		assert.NotContains(t, page, fmt.Sprintf("client=%q", rejected))
	}
}

// exportProbe sends one gauge, probe{client=client}, over gRPC.
func exportProbe(tb testing.TB, addr string, creds credentials.TransportCredentials, token, client string) error {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("probe")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(1)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.Attributes().PutStr("client", client)
	return exportOTLP(tb, addr, creds, token, md)
}

// exportOTLP sends md to the OTLP gRPC receiver at addr, as an agent does: with creds and, when
// token is not "", the bearer token.
func exportOTLP(tb testing.TB, addr string, creds credentials.TransportCredentials, token string, md pmetric.Metrics) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(tb, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	return err
}

// TestAgentRefusesUntrustedGateway runs two agents from distro/agent.yaml against one gateway:
// one trusts the CA that signed the gateway's certificate, the other a different CA. The second
// must refuse the TLS handshake, so none of its node's series reach the gateway, while the
// first one's do.
func TestAgentRefusesUntrustedGateway(t *testing.T) {
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets)
	waitHealthy(t, "the gateway", gateway.Health)
	stack.StartAgent(t, secrets, agentOptions(t, gateway, "trusting", "10.0.0.1"))
	distrusting := agentOptions(t, gateway, "distrusting", "10.0.0.2")
	distrusting.CAFile = secrets.ForeignCA
	refusing := stack.StartAgent(t, secrets, distrusting)

	eventually(t, "the distrusting agent to refuse the gateway's certificate", func() bool {
		return strings.Contains(refusing.Process.Output(), "certificate signed by unknown authority")
	})
	eventually(t, "the trusting agent's series on the gateway", func() bool {
		body, err := httpGet(gateway.Metrics)
		return err == nil && strings.Contains(string(body), `node_name="trusting"`)
	})
	body, err := httpGet(gateway.Metrics)
	require.NoError(t, err)
	assert.NotContains(t, string(body), `node_name="distrusting"`)
}

// TestGatewayKeepsNodeIdentity has two agents push to one gateway and a real Prometheus scrape
// them with the jobs deploy/prometheus/scrape-configs.yaml ships. The platform's dashboards
// select a node with instance=~"$node(:[0-9]*)?$": on the gateway's endpoint that must return
// that node's series and no other's, with instance="<node IP>:9102" as a direct scrape of the
// agent sets it. The node IPs are chosen so that a careless regular expression would match both
// (10.0.0.1 is a prefix of 10.0.0.11). The collectors' own telemetry must be there under the
// job names alert rules select.
//
// Prometheus keeps the gateway's instance labels only with honor_labels: true; the same job
// without it shows what happens otherwise (the node's instance becomes exported_instance and the
// platform's queries find nothing).
func TestGatewayKeepsNodeIdentity(t *testing.T) {
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets)
	waitHealthy(t, "the gateway", gateway.Health)
	nodes := map[string]string{"10.0.0.1": "node-a", "10.0.0.11": "node-b"}
	pods := []pod{{"gateway", "otelcol-gpu-gateway-0", "node-a", gateway.Endpoints}}
	var agents []*stack.Agent
	for ip, name := range nodes {
		agent := stack.StartAgent(t, secrets, agentOptions(t, gateway, name, ip))
		agents = append(agents, agent)
		pods = append(pods, pod{"agent", "otelcol-gpu-agent-" + name, name, agent.Endpoints})
	}
	jobs := shippedScrapeConfigs(t, pods)
	i := slices.IndexFunc(jobs, func(job map[string]any) bool { return job["job_name"] == "otelcol-gpu" })
	require.GreaterOrEqual(t, i, 0, "a job named otelcol-gpu")
	require.Equal(t, true, jobs[i]["honor_labels"])
	withoutHonorLabels := maps.Clone(jobs[i])
	withoutHonorLabels["job_name"] = "without-honor-labels"
	delete(withoutHonorLabels, "honor_labels")
	api := startPrometheusWith(t, scrapeConfigsYAML(t, append(jobs, withoutHonorLabels)))

	eventually(t, "Prometheus to have both nodes' task series from the gateway and the collectors' telemetry", func() bool {
		return series(t, api, `count by (instance) (task_cpu_percent{job="otelcol-gpu"})`) == 2 &&
			series(t, api, `count by (job, pod) (otelcol_process_uptime)`) == 3
	})
	for ip, name := range nodes {
		t.Run(name, func(t *testing.T) {
			selector := fmt.Sprintf(`{job="otelcol-gpu", instance=~"%s(:[0-9]*)?$"}`, ip)
			groups := query(t, api, fmt.Sprintf(`count by (instance, node_name) (%s)`, selector))
			require.Len(t, groups, 1, "one node's series, and all of them carry its name")
			assert.Equal(t, map[string]string{"instance": ip + ":9102", "node_name": name}, groups[0])
			for _, name := range []string{"node_cpu_seconds_total", "node_memory_MemTotal_bytes", "task_cpu_percent", "task_mem_usage_byte", "zombie_process_count"} {
				assert.Positive(t, series(t, api, fmt.Sprintf(`%s{instance=~"%s(:[0-9]*)?$"}`, name, ip)), name)
			}
			assert.Zero(t, series(t, api, fmt.Sprintf(`{job="without-honor-labels", instance=~"%s(:[0-9]*)?$"}`, ip)),
				"without honor_labels Prometheus replaces the node's instance by the gateway's")
			// The agent's own telemetry, as alert rules on a node's queue and send failures read it.
			// (The collector's own counters carry no _total suffix.)
			for _, metric := range []string{`otelcol_exporter_queue_size{data_type="metrics",`, `otelcol_exporter_sent_metric_points{`} {
				assert.Equal(t, 1, series(t, api, fmt.Sprintf(`%s job="otelcol-gpu-agent", node_name=%q, exporter="otlp_grpc/gateway"}`, metric, name)), metric)
			}
		})
	}
	assert.Zero(t, series(t, api, `{job="otelcol-gpu", service_instance_id!=""}`), "service.instance.id is instance, not a label of its own")
	// A direct scrape of an agent sets instance itself: its own page must not carry one.
	for _, agent := range agents {
		families, _, err := scrape(agent.Metrics)
		require.NoError(t, err)
		require.Contains(t, families, "task_cpu_percent")
		for name, family := range families {
			for _, m := range family.GetMetric() {
				for _, l := range m.GetLabel() {
					assert.NotContains(t, []string{"instance", "service_instance_id"}, l.GetName(), "%s on the agent's own page", name)
				}
			}
		}
	}
	eventually(t, "the gateway's own telemetry", func() bool {
		return series(t, api, `otelcol_receiver_accepted_metric_points{job="otelcol-gpu-gateway", receiver="otlp"} > 0`) == 1
	})
}

// pod is what kubernetes_sd's pod role would discover: one target per named container port.
type pod struct {
	component, name, node string
	endpoints             stack.Endpoints
}

// shippedScrapeConfigs returns deploy/prometheus/scrape-configs.yaml's jobs with their
// kubernetes_sd_configs (there is no API server here, and Debian's Prometheus has none of it) replaced by
// file_sd_configs that list what the pod role would find: each pod of the job's selected
// component, a target per container port, with the same __meta_kubernetes_pod_* labels. The
// shipped relabel rules then run unchanged.
func shippedScrapeConfigs(tb testing.TB, pods []pod) []map[string]any {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(tb), "deploy", "prometheus", "scrape-configs.yaml"))
	require.NoError(tb, err)
	var cfg struct {
		ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
	}
	require.NoError(tb, yaml.Unmarshal(raw, &cfg))
	require.NotEmpty(tb, cfg.ScrapeConfigs)
	dir := tb.TempDir()
	for _, job := range cfg.ScrapeConfigs {
		sds, ok := job["kubernetes_sd_configs"].([]any)
		require.True(tb, ok, "job %v discovers pods", job["job_name"])
		delete(job, "kubernetes_sd_configs")
		var groups []map[string]any
		for _, sd := range sds {
			selector := fmt.Sprint(sd.(map[string]any)["selectors"].([]any)[0].(map[string]any)["label"])
			for _, p := range pods {
				if !strings.Contains(selector, "app.kubernetes.io/component="+p.component) {
					continue
				}
				for port, url := range map[string]string{"metrics": p.endpoints.Metrics, "telemetry": p.endpoints.Telemetry} {
					groups = append(groups, map[string]any{
						"targets": []string{hostPort(url)},
						"labels": map[string]string{
							"__meta_kubernetes_pod_container_port_name": port,
							"__meta_kubernetes_pod_node_name":           p.node,
							"__meta_kubernetes_pod_name":                p.name,
						},
					})
				}
			}
		}
		require.NotEmpty(tb, groups, "job %v selects no pod", job["job_name"])
		file := filepath.Join(dir, fmt.Sprintf("%v.yaml", job["job_name"]))
		out, err := yaml.Marshal(groups)
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(file, out, 0o600))
		job["file_sd_configs"] = []map[string]any{{"files": []string{file}}}
	}
	return cfg.ScrapeConfigs
}

// scrapeConfigsYAML writes jobs as list items under scrape_configs:, the form
// startPrometheusWith takes.
func scrapeConfigsYAML(tb testing.TB, jobs []map[string]any) string {
	tb.Helper()
	out, err := yaml.Marshal(jobs)
	require.NoError(tb, err)
	return "  " + strings.ReplaceAll(strings.TrimRight(string(out), "\n"), "\n", "\n  ") + "\n"
}

// TestAgentResumesAfterGatewayRestart: the gateway is killed and started again on the same
// address; the agent's data reaches it again (the helper test/stack's Restart, which the edge
// tests build on).
func TestAgentResumesAfterGatewayRestart(t *testing.T) {
	secrets := stack.NewSecrets(t)
	gateway := stack.StartGateway(t, secrets)
	waitHealthy(t, "the gateway", gateway.Health)
	stack.StartAgent(t, secrets, agentOptions(t, gateway, "node-a", "10.0.0.1"))
	onGateway := func() bool {
		body, err := httpGet(gateway.Metrics)
		return err == nil && strings.Contains(string(body), `node_name="node-a"`)
	}
	eventually(t, "the agent's series on the gateway", onGateway)
	gateway.Process = gateway.Process.Restart(t, syscall.SIGKILL)
	waitHealthy(t, "the restarted gateway", gateway.Health)
	eventually(t, "the agent's series on the restarted gateway", onGateway)
}
