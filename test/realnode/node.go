// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package realnode runs a real single-node Kubernetes cluster on this machine, for the tests
// that install and run otelcol-gpu the way its users do: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet and kube-proxy (v1.34, built by
// test/kube/build-apiserver.sh), Debian's containerd and runc, a CNI bridge, images imported
// from OCI archives, and a device plugin for simulated GPUs (gpuplugin).
//
// The node has a network namespace of its own (a veth pair whose peer has no address, so no
// packet can leave it) and a mount namespace of its own, with / shared inside it so that pods
// can ask for HostToContainer propagation without touching the host's mounts. Inside it the
// paths the kubelet and containerd hard-code are the node's directory: /var/lib and /var/log are
// bind mounts of it and /run is a tmpfs. What the node changes outside its directory (the
// kubepods cgroups, the kernel settings the kubelet sets) is recorded before it is changed.
//
// One node per machine (a lock file), per test package: Main starts it in TestMain and tears it
// down afterwards; a reaper process tears it down if the test binary dies first (a panic, a
// timeout, a kill), and a run that finds a dead run's state tears that down before it starts.
// Every process is stopped by its PID; nothing is left behind.
//
// Needs root, Debian's containerd, runc, containernetworking-plugins, iptables, conntrack,
// busybox-static and etcd-server, and gcc (pause is built from its source).
package realnode // import "github.com/otelcol-gpu/otelcol-gpu/test/realnode"

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode/gpuplugin"
	"github.com/otelcol-gpu/otelcol-gpu/test/testproc"
)

// Options are what a test package needs of its node.
type Options struct {
	// Users are API users to make tokens for (Token, Kubeconfig), without any permission: the
	// test grants them what it checks, through RBAC.
	Users []string
	// Devices are the extended resources the node's device plugin advertises; none, no plugin.
	Devices []gpuplugin.Resource
}

// Node is a running node.
type Node struct {
	// Dir is the node's directory: configuration, data, logs (logs/<daemon>.log).
	Dir string
	// Admin is a client of the API server with every permission.
	Admin kubernetes.Interface
	// HTTP makes requests from inside the node's network (pods, the node's ports).
	HTTP *http.Client
	// Plugin is the device plugin, nil without Options.Devices.
	Plugin *gpuplugin.Plugin

	logf    func(string, ...any)
	lock    *lock
	reaper  io.Closer
	mu      sync.Mutex
	state   state
	bins    map[string]string
	daemons map[string]*daemon
	tokens  map[string]string
	caPool  *x509.CertPool
	dns     net.PacketConn
}

// reaperEnv marks the test binary started as the reaper of a node.
const reaperEnv = "OTELCOL_GPU_REALNODE_REAPER"

// Main is a test package's TestMain on a real node:
//
//	func TestMain(m *testing.M) { os.Exit(realnode.Main(m, options, func(n *realnode.Node) { node = n })) }
//
// It takes the machine's node lock, tears down what a killed run left, starts the reaper and
// the node (with options' Options), hands it to started, runs the tests, and tears the node
// down. A failure to start fails the run with the reason, and leaves nothing behind either.
func Main(m *testing.M, options func() (Options, error), started func(*Node)) int {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if os.Getenv(reaperEnv) != "" {
		return reap(logf)
	}
	if os.Geteuid() != 0 {
		logf("realnode: the real-node tests need root (namespaces, mounts, cgroups, a kubelet)")
		return 1
	}
	opts, err := options()
	if err != nil {
		logf("realnode: %v", err)
		return 1
	}
	begin := time.Now()
	n, err := start(opts, logf)
	if err != nil {
		logf("realnode: the node did not start: %v", err)
		return 1
	}
	logf("realnode: node %s up in %s (%s)", NodeName, time.Since(begin).Round(100*time.Millisecond), n.Dir)
	started(n)
	code := m.Run()
	if err := n.stop(); err != nil {
		logf("realnode: teardown: %v", err)
		code = 1
	}
	return code
}

// reap waits until the test binary that started it has gone (its end of the pipe on stdin is
// closed, however it went), then tears down what it left, if anything. It shares the test
// binary's output, so `go test` ends once it has.
func reap(logf func(string, ...any)) int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	if _, err := os.Stat(statePath()); errors.Is(err, fs.ErrNotExist) {
		return 0 // the test binary tore its node down
	}
	l, err := acquireLock(time.Minute)
	if err != nil {
		logf("realnode reaper: %v", err)
		return 1
	}
	defer l.release()
	return cleanStale("realnode reaper: the test binary has gone: tearing down its node in %s", logf)
}

// cleanStale tears down the node a dead run left, if any, saying so with why (a format for the
// node's directory). The caller holds the lock.
func cleanStale(why string, logf func(string, ...any)) int {
	s, err := readState()
	if err != nil {
		logf("realnode: %v", err)
		return 1
	}
	if s == nil {
		return 0
	}
	logf(why, s.Dir)
	if err := teardown(s, logf); err != nil {
		logf("realnode: %v", err)
		return 1
	}
	_ = os.Remove(statePath())
	return 0
}

// start brings the node up; on a failure it tears down what it had done.
func start(opts Options, logf func(string, ...any)) (n *Node, err error) {
	l, err := acquireLock(30 * time.Minute)
	if err != nil {
		return nil, err
	}
	if cleanStale("realnode: tearing down the node a previous run left in %s", logf) != 0 {
		l.release()
		return nil, errors.New("what a previous run left could not be removed")
	}
	n = &Node{logf: logf, lock: l, daemons: map[string]*daemon{}}
	// The reaper is this test binary again, in a session of its own so that a ^C to the test
	// does not reach it: it reads its stdin until this process has gone.
	reaper := exec.Command(os.Args[0])
	reaper.Env = append(os.Environ(), reaperEnv+"=1")
	reaper.Stdout, reaper.Stderr = os.Stderr, os.Stderr
	reaper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pipe, err := reaper.StdinPipe()
	if err == nil {
		err = reaper.Start()
	}
	if err != nil {
		l.release()
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	n.reaper = pipe
	go func() { _ = reaper.Wait() }()
	defer func() {
		if err != nil {
			if stopErr := n.stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			n = nil
		}
	}()
	if n.Dir, err = os.MkdirTemp("", "realnode-"); err != nil {
		return n, err
	}
	n.state.Dir = n.Dir
	err = n.state.save()
	if err != nil {
		return n, err
	}
	if err = n.namespaces(); err != nil {
		return n, fmt.Errorf("the node's namespaces: %w", err)
	}
	if err = n.writePKI(opts.Users); err != nil {
		return n, fmt.Errorf("certificates and tokens: %w", err)
	}
	n.HTTP = httpClient(n.state.netNS(), n.caPool)
	err = n.controlPlane()
	if err != nil {
		return n, err
	}
	err = n.runtime()
	if err != nil {
		return n, err
	}
	err = n.kubelet()
	if err != nil {
		return n, err
	}
	if len(opts.Devices) > 0 {
		if n.Plugin, err = gpuplugin.Start(filepath.Join(n.Dir, "root", "var", "lib", "kubelet", "device-plugins"), opts.Devices...); err != nil {
			return n, err
		}
	}
	err = n.ready(opts.Devices)
	return n, err
}

// stop tears the node down and gives the machine back.
func (n *Node) stop() error {
	if n.dns != nil {
		n.dns.Close()
	}
	if n.Plugin != nil {
		n.Plugin.Stop()
	}
	var err error
	if n.state.Dir != "" {
		err = teardown(&n.state, n.logf)
		for _, d := range n.daemons {
			<-d.exited // reaped: none is left a zombie
		}
	}
	if err == nil {
		_ = os.Remove(statePath())
	}
	// With the state left, the next run (or the reaper) tries again what failed.
	n.lock.release()
	// The reaper finds nothing left and exits.
	_ = n.reaper.Close()
	return err
}

// namespaces makes the node's network and mount namespaces, each held by a bind mount on a file
// of the node's directory.
func (n *Node) namespaces() error {
	root := filepath.Join(n.Dir, "root")
	for _, d := range []string{"logs", "images", "root/var/lib/kubelet/device-plugins", "root/var/log", "containerd", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{n.state.netNS(), n.state.mountNS()} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return err
		}
	}
	// The node's own DNS (serveDNS), for its daemons and for pods with dnsPolicy Default too:
	// none asks the host's resolver.
	//nolint:gosec // G306: a resolv.conf is world-readable; the node's daemons and pods read this one
	if err := os.WriteFile(filepath.Join(n.Dir, "resolv.conf"), []byte("nameserver "+NodeIP+"\n"), 0o644); err != nil {
		return err
	}
	net := []string{"nsenter", "--net=" + n.state.netNS(), "--"}
	mnt := []string{"nsenter", "--mount=" + n.state.mountNS(), "--"}
	steps := [][]string{
		// A copy of the host's mounts, private so that nothing done inside reaches the host. It
		// is made first, so that it holds no reference to the network namespace's file.
		{"unshare", "--mount=" + n.state.mountNS(), "--propagation", "private", "true"},
		{"unshare", "--net=" + n.state.netNS(), "true"},
		append(net, "ip", "link", "set", "lo", "up"),
		// There is no dummy link type on this kernel: a veth pair, both ends inside.
		append(net, "ip", "link", "add", "rn0", "type", "veth", "peer", "name", "rn1"),
		append(net, "ip", "addr", "add", NodeIP+"/24", "dev", "rn0"),
		append(net, "ip", "link", "set", "rn0", "up"),
		append(net, "ip", "link", "set", "rn1", "up"),
		// Anything not for the node goes to rn1, which has no address, and stops there.
		append(net, "ip", "route", "add", "default", "dev", "rn0"),
		// Shared inside, so that containers may ask for HostToContainer propagation.
		append(mnt, "mount", "--make-rshared", "/"),
		append(mnt, "mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"),
		append(mnt, "mount", "--bind", filepath.Join(root, "var", "lib"), "/var/lib"),
		append(mnt, "mount", "--bind", filepath.Join(root, "var", "log"), "/var/log"),
		// containerd and the kubelet ask the node's DNS, not the host's resolver.
		append(mnt, "mount", "--bind", filepath.Join(n.Dir, "resolv.conf"), "/etc/resolv.conf"),
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// DRA's device taints, alpha in Kubernetes 1.34: the gate on the API server, the scheduler and
// the controller manager, and their API (resource.k8s.io/v1alpha3, DeviceTaintRules) served, so
// that the quarantine can take one GPU out instead of the node (deploy/README.md).
const (
	featureGates  = "DRADeviceTaints=true"
	runtimeConfig = "resource.k8s.io/v1alpha3=true"
)

// controlPlane starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
func (n *Node) controlPlane() error {
	etcdBin := os.Getenv("ETCD_BIN")
	if etcdBin == "" {
		etcdBin = "/usr/bin/etcd"
	}
	bins := map[string]string{}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		bin, err := kube.Built(c)
		if err != nil {
			return err
		}
		bins[c] = bin
	}
	n.bins = bins
	pkiDir := filepath.Join(n.Dir, "pki")
	etcd, err := n.startDaemon("etcd", etcdBin, "--name=realnode", "--data-dir="+filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=realnode=http://127.0.0.1:2380")
	if err != nil {
		return err
	}
	n.daemons["etcd"] = etcd
	err = etcd.waitUntil(time.Minute, "healthy", func(ctx context.Context) bool { return n.get(ctx, "http://127.0.0.1:2379/health", "") })
	if err != nil {
		return err
	}
	apiserver, err := n.startDaemon("kube-apiserver", bins["kube-apiserver"],
		"--bind-address=0.0.0.0", "--advertise-address="+NodeIP, "--secure-port=6443",
		"--etcd-servers=http://127.0.0.1:2379",
		"--tls-cert-file="+filepath.Join(pkiDir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(pkiDir, "apiserver.key"),
		"--client-ca-file="+n.CA(), "--token-auth-file="+filepath.Join(pkiDir, "tokens.csv"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pkiDir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(pkiDir, "sa.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--kubelet-client-certificate="+filepath.Join(pkiDir, "kubelet-client.crt"), "--kubelet-client-key="+filepath.Join(pkiDir, "kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false", "--feature-gates="+featureGates, "--runtime-config="+runtimeConfig)
	if err != nil {
		return err
	}
	n.daemons["kube-apiserver"] = apiserver
	err = apiserver.waitUntil(3*time.Minute, "ready", func(ctx context.Context) bool { return n.get(ctx, APIServer+"/readyz", n.tokens["admin"]) })
	if err != nil {
		return err
	}
	if n.Admin, err = kubernetes.NewForConfig(&rest.Config{
		Host: APIServer, BearerToken: n.tokens["admin"], TLSClientConfig: rest.TLSClientConfig{CAFile: n.CA()},
		Dial: dialer(n.state.netNS()), QPS: 100, Burst: 200,
	}); err != nil {
		return err
	}
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		kubeconfig, err := n.Kubeconfig(componentUsers[c])
		if err != nil {
			return err
		}
		args := []string{
			"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", "--leader-elect=false", "--feature-gates=" + featureGates,
		}
		if c == "kube-controller-manager" {
			// Each controller with its own service account, as kubeadm runs it: as one user, the
			// node lifecycle controller may not remove the node's not-ready taint.
			args = append(args, "--use-service-account-credentials=true",
				"--service-account-private-key-file="+filepath.Join(pkiDir, "sa.key"), "--root-ca-file="+n.CA())
		}
		d, err := n.startDaemon(c, bins[c], args...)
		if err != nil {
			return err
		}
		n.daemons[c] = d
	}
	return nil
}

// runtime starts containerd, imports the node's own images and serves the cluster DNS.
func (n *Node) runtime() error {
	files := map[string]string{
		filepath.Join(n.Dir, "containerd", "config.toml"):            n.containerdConfig(),
		filepath.Join(n.Dir, "cni", "net.d", "10-realnode.conflist"): n.cniConfig(),
		filepath.Join(n.Dir, "kubelet.yaml"):                         n.kubeletConfig(),
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	containerd, err := n.startDaemon("containerd", "containerd", "--config="+filepath.Join(n.Dir, "containerd", "config.toml"))
	if err != nil {
		return err
	}
	n.daemons["containerd"] = containerd
	err = containerd.waitUntil(time.Minute, "serving", func(context.Context) bool {
		_, ctrErr := n.Ctr("version")
		return ctrErr == nil
	})
	if err != nil {
		return err
	}
	archives, err := buildImages(filepath.Join(n.Dir, "images"))
	if err != nil {
		return err
	}
	for _, a := range archives {
		if out, importErr := n.Ctr("images", "import", a); importErr != nil {
			return fmt.Errorf("import %s: %w: %s", a, importErr, out)
		}
	}
	if n.dns, err = listenPacket(n.state.netNS(), "udp", NodeIP+":53"); err != nil {
		return fmt.Errorf("the node's DNS: %w", err)
	}
	go serveDNS(n.dns, n.serviceIP)
	return nil
}

// serviceIP looks a Service up for the node's DNS.
func (n *Node) serviceIP(namespace, name string) (net.IP, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc, err := n.Admin.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return net.ParseIP(svc.Spec.ClusterIP), true, nil
}

// kubelet starts the kubelet and kube-proxy, after recording the kernel settings the kubelet
// changes.
func (n *Node) kubelet() error {
	n.state.Sysctls = map[string]string{}
	for _, key := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			return err
		}
		n.state.Sysctls[key] = strings.TrimSpace(string(v))
	}
	if err := n.state.save(); err != nil {
		return err
	}
	kubeconfig, err := n.Kubeconfig(componentUsers["kubelet"])
	if err != nil {
		return err
	}
	kubelet, err := n.startDaemon("kubelet", n.bins["kubelet"], "--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+kubeconfig, "--hostname-override="+NodeName, "--node-ip="+NodeIP)
	if err != nil {
		return err
	}
	n.daemons["kubelet"] = kubelet
	if kubeconfig, err = n.Kubeconfig(componentUsers["kube-proxy"]); err != nil {
		return err
	}
	// The conntrack flags leave the machine's global nf_conntrack_max alone.
	proxy, err := n.startDaemon("kube-proxy", n.bins["kube-proxy"], "--kubeconfig="+kubeconfig,
		"--hostname-override="+NodeName, "--cluster-cidr="+podCIDR, "--proxy-mode=iptables",
		"--bind-address=127.0.0.1", "--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256",
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0")
	if err != nil {
		return err
	}
	n.daemons["kube-proxy"] = proxy
	return nil
}

// ready waits until pods can run: the node is Ready, the default service account exists, and
// the device plugin's devices are allocatable.
func (n *Node) ready(devices []gpuplugin.Resource) error {
	kubelet := n.daemons["kubelet"]
	if err := kubelet.waitUntil(2*time.Minute, "Ready", func(ctx context.Context) bool {
		node, err := n.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}); err != nil {
		return err
	}
	if err := n.daemons["kube-controller-manager"].waitUntil(2*time.Minute, "making the default service account", func(ctx context.Context) bool {
		_, err := n.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return err
	}
	err := kubelet.waitUntil(2*time.Minute, "offering the device plugin's devices", func(ctx context.Context) bool {
		return n.Allocatable(ctx, devices)
	})
	if err != nil && n.Plugin != nil && n.Plugin.Err() != nil {
		err = fmt.Errorf("%w\nthe device plugin: %w", err, n.Plugin.Err())
	}
	return err
}

// Allocatable tells whether the node offers every device of resources.
func (n *Node) Allocatable(ctx context.Context, resources []gpuplugin.Resource) bool {
	node, err := n.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, r := range resources {
		q, ok := node.Status.Allocatable[corev1.ResourceName(r.Name)]
		if !ok || q.Value() != int64(len(r.IDs)) {
			return false
		}
	}
	return true
}

// get tells whether url answers 200 to a GET from inside the node's network.
func (n *Node) get(ctx context.Context, url, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Ctr runs containerd's ctr against the node's containerd, in the k8s.io namespace the CRI uses.
func (n *Node) Ctr(args ...string) (string, error) {
	out, err := n.Command("ctr", append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	return string(out), err
}

// Kubectl runs kubectl as admin inside the node's network, stdin (if any) on its input.
func (n *Node) Kubectl(stdin []byte, args ...string) (string, error) {
	kubeconfig, err := n.Kubeconfig("admin")
	if err != nil {
		return "", err
	}
	cmd := n.Command(n.bins["kubectl"], append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Command prepares a command that runs inside the node's namespaces (a tool, a peer such as
// Prometheus). Whoever starts it stops it; one still running at the teardown is killed there.
func (n *Node) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--mount=" + n.state.mountNS(), "--net=" + n.state.netNS(), "--", name}, args...)...)
}

// HostPath is where a path of the node (/var/lib/kubelet, /var/log/pods) is on this machine.
func (n *Node) HostPath(path string) string {
	for _, under := range []string{"/var/lib", "/var/log"} {
		if path == under || strings.HasPrefix(path, under+"/") {
			return filepath.Join(n.Dir, "root", path)
		}
	}
	return path
}

// ContainerPID is the PID (on this machine) of a container's first process; id is the
// container's id without its runtime prefix (containerd://).
func (n *Node) ContainerPID(id string) (int, error) {
	data, err := os.ReadFile(filepath.Join(n.bundle(id), "init.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// ContainerRoot is where a container's root filesystem is mounted on the node.
func (n *Node) ContainerRoot(id string) string { return filepath.Join(n.bundle(id), "rootfs") }

// bundle is a container's directory in containerd's state (its runc bundle).
func (n *Node) bundle(id string) string {
	return filepath.Join(n.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id)
}

// KubeletPID is the kubelet's PID.
func (n *Node) KubeletPID() int { return n.daemons["kubelet"].pid }

// RestartKubelet stops the kubelet by its PID and starts it again as before; containers keep
// running, as they do when a node's kubelet restarts. It returns once the kubelet has started,
// not once it is healthy.
func (n *Node) RestartKubelet() error {
	n.StopKubelet()
	return n.StartKubelet()
}

// StopKubelet stops the kubelet by its PID; containers keep running. StartKubelet starts it
// again as before, and returns once it has started, not once it is healthy.
func (n *Node) StopKubelet()        { n.daemons["kubelet"].stop() }
func (n *Node) StartKubelet() error { return n.run(n.daemons["kubelet"]) }

// Reregister makes the kubelet register the node anew, as a node joins the cluster: the kubelet
// stopped, the Node object deleted, and the kubelet started again with flags added for this
// start only (--register-with-taints applies when the kubelet creates its Node, never to one that
// exists). Containers keep running, and the pods bound to the node stay: the pod garbage
// collector deletes a pod only once its node has been gone for 40 s, and the kubelet registers
// within seconds. It returns once the Node exists again.
func (n *Node) Reregister(ctx context.Context, flags ...string) error {
	d := n.daemons["kubelet"]
	d.stop()
	if err := n.Admin.CoreV1().Nodes().Delete(ctx, NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(err, n.run(d))
	}
	argv := d.argv
	d.argv = append(append([]string(nil), argv...), flags...)
	err := n.run(d)
	d.argv = argv
	if err != nil {
		return err
	}
	return d.waitUntil(time.Minute, "the kubelet to register the node again", func(ctx context.Context) bool {
		_, err := n.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		return err == nil
	})
}

// APIServerPID is kube-apiserver's PID (a test stops and continues it with SIGSTOP/SIGCONT).
func (n *Node) APIServerPID() int { return n.daemons["kube-apiserver"].pid }

// Log is the end of a daemon's log.
func (n *Node) Log(daemon string, lines int) string {
	return testproc.Tail(filepath.Join(n.Dir, "logs", daemon+".log"), lines)
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
