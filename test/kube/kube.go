// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package kube starts a real control plane for end-to-end tests: etcd and kube-apiserver,
// listening on 127.0.0.1 only, on ports chosen at run time, with their data, keys and
// certificates in the test's temporary directory. There is no kubelet, scheduler or controller
// manager: tests create nodes and pods and write their status through the API themselves.
//
// The binaries come from KUBE_APISERVER_BIN (build it with test/kube/build-apiserver.sh; when
// the variable is unset its cache location is tried) and ETCD_BIN (default /usr/bin/etcd, from
// Debian's etcd-server). A missing binary fails the test, with what to do about it: an
// end-to-end test that skips would pass without testing anything.
package kube // import "github.com/otelcol-gpu/otelcol-gpu/test/kube"

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// KubeVersion is the kube-apiserver version build-apiserver.sh builds by default.
const KubeVersion = "v1.34.4"

// Cluster is a running etcd + kube-apiserver pair.
type Cluster struct {
	// Host is the API server's URL, https://127.0.0.1:<port>.
	Host string
	// Admin is a client with every permission (its user is in system:masters).
	Admin kubernetes.Interface
	// AdminConfig is Admin's configuration, for tests that need their own client settings.
	AdminConfig *rest.Config

	tb        testing.TB
	dir       string
	certs     *certs
	tokens    map[string]string // user name -> token
	apiArgs   []string
	apiBin    string
	etcd      *process
	apiserver *process
}

// Start starts etcd and kube-apiserver and waits until the API server is ready. users are the
// names of extra users to create tokens for (see Kubeconfig); they have no permission until the
// test grants some (RBAC is on).
func Start(tb testing.TB, users ...string) *Cluster {
	tb.Helper()
	apiBin := apiserverBinary(tb)
	etcdBin := binary(tb, "ETCD_BIN", "/usr/bin/etcd", "install Debian's etcd-server (apt-get install -y etcd-server) or set ETCD_BIN")

	c := &Cluster{tb: tb, dir: tb.TempDir(), tokens: map[string]string{}, apiBin: apiBin}
	c.certs = newCerts(tb, c.dir)

	etcdClient, etcdPeer := freePort(tb), freePort(tb)
	c.etcd = startProcess(tb, filepath.Join(c.dir, "etcd.log"), etcdBin,
		"--name=default",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:"+etcdClient,
		"--advertise-client-urls=http://127.0.0.1:"+etcdClient,
		"--listen-peer-urls=http://127.0.0.1:"+etcdPeer,
		"--initial-advertise-peer-urls=http://127.0.0.1:"+etcdPeer,
		"--initial-cluster=default=http://127.0.0.1:"+etcdPeer,
	)
	waitFor(tb, c.etcd, "etcd", 60*time.Second, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + etcdClient + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	var tokens bytes.Buffer
	for i, user := range append([]string{"admin"}, users...) {
		token := fmt.Sprintf("token-%d-%s", i, user)
		c.tokens[user] = token
		group := ""
		if user == "admin" {
			group = `,"system:masters"`
		}
		fmt.Fprintf(&tokens, "%s,%s,uid-%s%s\n", token, user, user, group)
	}
	tokenFile := filepath.Join(c.dir, "tokens.csv")
	writeFile(tb, tokenFile, tokens.Bytes())

	port := freePort(tb)
	c.Host = "https://127.0.0.1:" + port
	c.apiArgs = []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + port,
		"--etcd-servers=http://127.0.0.1:" + etcdClient,
		"--tls-cert-file=" + c.certs.serverCert,
		"--tls-private-key-file=" + c.certs.serverKey,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.certs.saPub,
		"--service-account-signing-key-file=" + c.certs.saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		// No controller manager creates the default service accounts that this admission
		// plugin would insist on for every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	}
	c.AdminConfig = c.config("admin")
	admin, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		tb.Fatalf("admin client: %v", err)
	}
	c.Admin = admin
	c.StartAPIServer()
	return c
}

// StartAPIServer (re)starts kube-apiserver on the cluster's address and waits until it is
// ready; etcd keeps the cluster's state across a restart.
func (c *Cluster) StartAPIServer() {
	c.tb.Helper()
	if c.apiserver != nil && c.apiserver.running() {
		c.tb.Fatal("kube-apiserver is already running")
	}
	c.apiserver = startProcess(c.tb, filepath.Join(c.dir, "kube-apiserver.log"), c.apiBin, c.apiArgs...)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.certs.pool}}}
	waitFor(c.tb, c.apiserver, "kube-apiserver", 3*time.Minute, func() bool {
		req, _ := http.NewRequest(http.MethodGet, c.Host+"/readyz", http.NoBody)
		req.Header.Set("Authorization", "Bearer "+c.tokens["admin"])
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// RestartAPIServerWith restarts kube-apiserver with args added to its own, e.g. a feature gate
// and the runtime config of an API that is off by default.
func (c *Cluster) RestartAPIServerWith(args ...string) {
	c.tb.Helper()
	c.StopAPIServer()
	c.apiArgs = append(c.apiArgs, args...)
	c.StartAPIServer()
}

// StopAPIServer kills kube-apiserver, as a crash or a lost control-plane node would, and waits
// until it has exited. (A graceful stop waits for the clients' watches to end, for a minute.)
func (c *Cluster) StopAPIServer() {
	c.tb.Helper()
	if c.apiserver.running() {
		_ = c.apiserver.cmd.Process.Kill()
		<-c.apiserver.exited
	}
}

// GrantWatchdog gives user (named in Start) what the k8s_watchdog receiver needs, as deploy/
// ships it: get, list and watch pods and nodes. /healthz is open to every authenticated user.
func (c *Cluster) GrantWatchdog(user string) {
	c.tb.Helper()
	ctx := context.Background()
	_, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "k8s-watchdog"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		c.tb.Fatalf("create the watchdog's ClusterRole: %v", err)
	}
	_, err = c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "k8s-watchdog"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "k8s-watchdog"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		c.tb.Fatalf("bind the watchdog's ClusterRole to %s: %v", user, err)
	}
}

// Kubeconfig writes a kubeconfig for user (given to Start) and returns its path.
func (c *Cluster) Kubeconfig(user string) string {
	c.tb.Helper()
	token, ok := c.tokens[user]
	if !ok {
		c.tb.Fatalf("no user %q: name it in kube.Start", user)
	}
	path := filepath.Join(c.dir, "kubeconfig-"+user)
	writeFile(c.tb, path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: %s
      certificate-authority: %s
contexts:
  - name: e2e
    context: {cluster: e2e, user: %s}
current-context: e2e
users:
  - name: %s
    user: {token: %s}
`, c.Host, c.certs.caCert, user, user, token)))
	return path
}

func (c *Cluster) config(user string) *rest.Config {
	return &rest.Config{
		Host:            c.Host,
		BearerToken:     c.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.certs.caCert},
		// Tests create thousands of objects; client-go's default of 5 requests/s would make that
		// the slowest part of the test.
		QPS:   1000,
		Burst: 2000,
	}
}

// apiserverBinary finds kube-apiserver: KUBE_APISERVER_BIN, else build-apiserver.sh's cache.
func apiserverBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := Built("kube-apiserver")
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

func binary(tb testing.TB, env, def, hint string) string {
	tb.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = def
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		tb.Fatalf("end-to-end tests need %s=%q to be an executable: %v; %s", env, path, err, hint)
	}
	return path
}

func freePort(tb testing.TB) string { return strconv.Itoa(stack.FreePort(tb)) }

func writeFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// process is a server started by a test, stopped by its PID when the test ends.
type process struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
}

func startProcess(tb testing.TB, logPath, bin string, args ...string) *process {
	tb.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that a ^C to `go test` does not reach it before the cleanup does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("starting %s: %v", bin, err)
	}
	p := &process{name: filepath.Base(bin), log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		p.stop(tb)
		if tb.Failed() {
			tb.Logf("last lines of %s:\n%s", p.log, tail(p.log, 40))
		}
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) stop(tb testing.TB) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		tb.Logf("%s (pid %d) ignored SIGTERM and was killed", p.name, p.cmd.Process.Pid)
	}
}

// waitFor polls ready until it holds, failing early if the process exits.
func waitFor(tb testing.TB, p *process, what string, limit time.Duration, ready func() bool) {
	tb.Helper()
	poll.UntilNoError(tb, limit, what+" to be ready", func() error {
		if !p.running() {
			tb.Fatalf("%s exited before it was ready; %v", what, notReady{p})
		}
		if ready() {
			return nil
		}
		return notReady{p}
	})
}

// notReady reads the process's log only when the test fails.
type notReady struct{ p *process }

func (e notReady) Error() string {
	return fmt.Sprintf("last lines of %s:\n%s", e.p.log, tail(e.p.log, 40))
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
