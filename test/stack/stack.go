// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package stack runs the configurations that ship in distro/ (agent.yaml, gateway.yaml) with
// the built collector, the way deploy/ runs them on a cluster: the same files, the environment
// the downward API gives, the token and certificates of the Secrets (made by NewSecrets), and
// only the host paths and listening ports pointed at the test's machine. Everything listens on
// 127.0.0.1; each process is stopped by its PID when the test ends.
//
// Two distributions run them (`make build` builds both): the agent's configurations
// (AgentConfigs) run with otelcol-gpu-agent, OTELCOL_AGENT_BIN or else bin/otelcol-gpu-agent;
// the rest (the gateway's) with otelcol-gpu, OTELCOL_BIN or else bin/otelcol-gpu.
package stack // import "github.com/otelcol-gpu/otelcol-gpu/test/stack"

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// AgentConfigs are the configurations in distro/ that the agent's distribution
// (builder-agent.yaml) runs: the DaemonSet's, make run's, make demo's, make demo-dcgm's and make demo-amd's, and the semconv example.
var AgentConfigs = []string{"agent.yaml", "local.yaml", "demo.yaml", "demo-dcgm.yaml", "demo-amd.yaml", "semconv-otlp.yaml"}

// Binary is the gateway's distribution, otelcol-gpu; its absence fails the test.
func Binary(tb testing.TB) string {
	tb.Helper()
	return binary(tb, "OTELCOL_BIN", "otelcol-gpu")
}

// AgentBinary is the agent's distribution, otelcol-gpu-agent; its absence fails the test.
func AgentBinary(tb testing.TB) string {
	tb.Helper()
	return binary(tb, "OTELCOL_AGENT_BIN", "otelcol-gpu-agent")
}

// CheckBinary is the node check, otelcol-gpu-check (cmd/gpucheck); its absence fails the test.
func CheckBinary(tb testing.TB) string {
	tb.Helper()
	return binary(tb, "OTELCOL_CHECK_BIN", "otelcol-gpu-check")
}

// BinaryFor is the distribution that runs config (a path whose file name is in distro/, or a
// test's own configuration, which needs the gateway's distribution).
func BinaryFor(tb testing.TB, config string) string {
	tb.Helper()
	if filepath.Dir(config) == filepath.Join(RepoRoot(), "distro") && slices.Contains(AgentConfigs, filepath.Base(config)) {
		return AgentBinary(tb)
	}
	return Binary(tb)
}

// ReportBinary is the GPU efficiency report, gpureport; its absence fails the test.
func ReportBinary(tb testing.TB) string {
	tb.Helper()
	return binary(tb, "GPUREPORT_BIN", "gpureport")
}

func binary(tb testing.TB, env, name string) string {
	tb.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		bin = filepath.Join(RepoRoot(), "bin", name)
	}
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("the binary %s is needed: run `make build`, or set %s: %v", name, env, err)
	}
	return bin
}

// FreePort asks the kernel for a free loopback port.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// Get fetches url and returns its body; a status other than 200 is an error. timeout bounds a
// hung peer.
func Get(url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// Endpoints are where a collector listens.
type Endpoints struct {
	// Metrics is the prometheus exporter's page, Telemetry the collector's own metrics
	// (service::telemetry), Health the health_check extension: each a full URL.
	Metrics, Telemetry, Health string
}

func newEndpoints(tb testing.TB) (Endpoints, []string) {
	metrics, telemetry, health := FreePort(tb), FreePort(tb), FreePort(tb)
	endpoints := Endpoints{
		Metrics:   fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics),
		Telemetry: fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry),
		Health:    fmt.Sprintf("http://127.0.0.1:%d/", health),
	}
	sets := []string{
		fmt.Sprintf("exporters::prometheus_page::endpoint=127.0.0.1:%d", metrics),
		fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", health),
		fmt.Sprintf("service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", telemetry),
	}
	return endpoints, sets
}

// Gateway is a collector running distro/gateway.yaml.
type Gateway struct {
	Endpoints
	// OTLP is the OTLP gRPC receiver's host:port (TLS, bearer token).
	OTLP string
	// JobRecords is the file of the ended jobs' records (file/job_records), in a temporary
	// directory beside job_record's checkpoint.
	JobRecords string
	Process    *Process
}

// StartGateway runs distro/gateway.yaml with s's certificate, key and token. The k8s_watchdog
// receiver is left out of its pipelines unless the test's sets put it back (it needs an API
// server: see test/kube). The k8s_gpu_health connector stays in them, as a gateway's whose API
// server is down: it reads the agents' data, writes nothing and holds nothing up; its
// kubeconfig points where nothing listens. sets are more --set overrides.
func StartGateway(tb testing.TB, s *Secrets, sets ...string) *Gateway {
	tb.Helper()
	ep, args := newEndpoints(tb)
	g := &Gateway{Endpoints: ep, OTLP: fmt.Sprintf("127.0.0.1:%d", FreePort(tb))}
	jobRecords := tb.TempDir()
	g.JobRecords = filepath.Join(jobRecords, "records.jsonl")
	args = append(args,
		"extensions::file_storage/job_records::directory="+jobRecords,
		"extensions::file_storage/job_records::compaction::directory="+jobRecords,
		"exporters::file/job_records::path="+g.JobRecords,
		"receivers::otlp::protocols::grpc::endpoint="+g.OTLP,
		"receivers::otlp::protocols::grpc::tls::cert_file="+s.GatewayCert,
		"receivers::otlp::protocols::grpc::tls::key_file="+s.GatewayKey,
		"extensions::bearertokenauth/agents::filename="+s.GatewayToken,
		"service::pipelines::metrics::receivers=[otlp]",
		"service::pipelines::logs::receivers=[otlp]",
		"connectors::k8s_gpu_health::auth_type=kubeConfig",
		"connectors::k8s_gpu_health::kubeconfig_path="+unreachableKubeconfig(tb),
		"connectors::k8s_gpu_health::sync_timeout=1ms",
	)
	g.Process = Start(tb, Binary(tb), config("gateway.yaml", append(args, sets...)), []string{"MY_POD_IP=127.0.0.1", "MY_POD_NAMESPACE=otelcol-gpu"})
	return g
}

// unreachableKubeconfig writes a kubeconfig of an API server that nothing serves.
func unreachableKubeconfig(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://127.0.0.1:%d"}}]
contexts: [{name: down, context: {cluster: down, user: nobody}}]
current-context: down
users: [{name: nobody, user: {token: none}}]
`, FreePort(tb))
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Agent is a collector running distro/agent.yaml.
type Agent struct {
	Endpoints
	Process *Process
}

// AgentOptions say which node an agent plays and where its gateway is.
type AgentOptions struct {
	// NodeName and NodeIP are what the downward API gives (spec.nodeName, status.hostIP);
	// NodeIP only names the node (instance=<NodeIP>:9102): the agent listens on 127.0.0.1.
	NodeName, NodeIP string
	// RootPath is the host's / (a fixture tree, or / for this machine).
	RootPath string
	// Gateway is the gateway's OTLP host:port; CAFile and TokenFile default to s's agent files.
	Gateway, CAFile, TokenFile string
	// QueueDir is the persistent queue's directory; empty means a new temporary one. Give the
	// same directory to a restarted agent to keep its queue.
	QueueDir string
	// Sets are more --set overrides.
	Sets []string
}

// StartAgent runs distro/agent.yaml as node o.NodeName.
func StartAgent(tb testing.TB, s *Secrets, o AgentOptions) *Agent {
	tb.Helper()
	if o.CAFile == "" {
		o.CAFile = s.AgentCA
	}
	if o.TokenFile == "" {
		o.TokenFile = s.AgentToken
	}
	if o.QueueDir == "" {
		o.QueueDir = filepath.Join(tb.TempDir(), "queue")
	}
	ep, args := newEndpoints(tb)
	args = append(args,
		"receivers::task::root_path="+o.RootPath,
		"receivers::gpu::root_path="+o.RootPath,
		"processors::gpu_attribution::root_path="+o.RootPath,
		"exporters::otlp_grpc/gateway::endpoint="+o.Gateway,
		"exporters::otlp_grpc/gateway::tls::ca_file="+o.CAFile,
		"extensions::bearertokenauth/gateway::filename="+o.TokenFile,
		"extensions::file_storage/queue::directory="+o.QueueDir,
		"extensions::file_storage/queue::compaction::directory="+o.QueueDir,
		"extensions::file_storage_check/queue::directory="+o.QueueDir,
	)
	env := []string{"MY_POD_IP=127.0.0.1", "K8S_NODE_NAME=" + o.NodeName, "K8S_NODE_IP=" + o.NodeIP}
	return &Agent{Endpoints: ep, Process: Start(tb, AgentBinary(tb), config("agent.yaml", append(args, o.Sets...)), env)}
}

func config(name string, sets []string) []string {
	args := []string{"--config", filepath.Join(RepoRoot(), "distro", name)}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// Process is a running collector or peer.
type Process struct {
	bin       string
	args, env []string
	cmd       *exec.Cmd
	out       output
	exited    chan struct{}
}

// Start runs bin with args, and env added to this process's environment, in its own process
// group. It is stopped (SIGTERM, then SIGKILL after 10 s) when the test ends, and its output
// logged if the test failed.
func Start(tb testing.TB, bin string, args, env []string) *Process {
	tb.Helper()
	name := filepath.Base(bin)
	p := &Process{bin: bin, args: args, env: env, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() {
		p.Stop(syscall.SIGTERM)
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", name, p.Output())
		}
	})
	return p
}

// Stop sends sig to the process and waits until it has exited; SIGKILL follows after 10 s.
func (p *Process) Stop(sig syscall.Signal) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// Restart stops the process with sig (SIGTERM for a clean stop, SIGKILL for a crash) and starts
// it again with the same arguments and environment, so on the same ports and, for an agent, the
// same queue directory. It returns the new process.
func (p *Process) Restart(tb testing.TB, sig syscall.Signal) *Process {
	tb.Helper()
	p.Stop(sig)
	return p.StartAgain(tb)
}

// StartAgain starts a stopped process again with the same arguments and environment, e.g. a
// gateway back after an outage the test made with Stop.
func (p *Process) StartAgain(tb testing.TB) *Process {
	tb.Helper()
	return Start(tb, p.bin, p.args, p.env)
}

// PID is the process's id (for reading its CPU time and memory under /proc).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Output is what the process has written to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(b)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
