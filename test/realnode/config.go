// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/test/pki"
)

// The node's addresses, all inside its own network namespace: the same on every run, and
// reachable from nowhere else.
const (
	// NodeName is the node's name.
	NodeName = "realnode"
	// NodeIP is the node's address, on a veth whose peer has none: the only way out of the
	// namespace leads nowhere.
	NodeIP = "10.250.0.2"
	// APIServer is the API server's URL, inside the node's network.
	APIServer = "https://" + NodeIP + ":6443"
	// podCIDR is the CNI bridge's pod network, serviceCIDR the Services'.
	podCIDR       = "10.244.0.0/24"
	podGateway    = "10.244.0.1"
	serviceCIDR   = "10.96.0.0/24"
	kubernetesSvc = "10.96.0.1"
	// bridge is the CNI bridge's interface.
	bridge = "rnbr0"
)

// componentUsers are the control plane's own users: kube-apiserver's bootstrap RBAC gives each
// what it needs, and the Node authorizer the kubelet's.
var componentUsers = map[string]string{
	"kube-controller-manager": "system:kube-controller-manager",
	"kube-scheduler":          "system:kube-scheduler",
	"kube-proxy":              "system:kube-proxy",
	"kubelet":                 "system:node:" + NodeName,
}

// writePKI makes the cluster's CA, the API server's serving certificate, its client
// certificate for the kubelets, the service-account key pair and a token per user, in dir.
func (n *Node) writePKI(users []string) error {
	dir := filepath.Join(n.Dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := pki.New("otelcol-gpu realnode CA")
	if err != nil {
		return err
	}
	if err := ca.WriteCertFile(n.CA()); err != nil {
		return err
	}
	n.caPool = ca.Pool()
	if err := ca.IssueFiles(pki.Spec{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(kubernetesSvc)},
	}, filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")); err != nil {
		return err
	}
	// kubectl logs, exec and port-forward go through the kubelet, which checks this certificate
	// against the CA (its group may do anything).
	if err := ca.IssueFiles(pki.Spec{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		filepath.Join(dir, "kubelet-client.crt"), filepath.Join(dir, "kubelet-client.key")); err != nil {
		return err
	}
	if err := pki.NewKeyFiles(filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")); err != nil {
		return err
	}
	var tokens bytes.Buffer
	n.tokens = map[string]string{}
	add := func(user, groups string) {
		token := randomHex()
		n.tokens[user] = token
		fmt.Fprintf(&tokens, "%s,%s,%s%s\n", token, user, user, groups)
	}
	add("admin", `,"system:masters"`)
	for _, user := range componentUsers {
		groups := ""
		if user == componentUsers["kubelet"] {
			groups = `,"system:nodes"`
		}
		add(user, groups)
	}
	for _, user := range users {
		add(user, "")
	}
	return os.WriteFile(filepath.Join(dir, "tokens.csv"), tokens.Bytes(), 0o600)
}

// CA is the cluster CA's certificate file.
func (n *Node) CA() string { return filepath.Join(n.Dir, "pki", "ca.crt") }

// Token is the bearer token of an API user: admin, or one named in Options.Users.
func (n *Node) Token(user string) string { return n.tokens[user] }

// Kubeconfig writes a kubeconfig for user (admin, a component's user, or one of Options.Users)
// and returns its path. The server is APIServer: use it inside the node's network.
func (n *Node) Kubeconfig(user string) (string, error) {
	token, ok := n.tokens[user]
	if !ok {
		return "", fmt.Errorf("no API user %q: name it in Options.Users", user)
	}
	path := filepath.Join(n.Dir, "pki", "kubeconfig-"+strings.ReplaceAll(user, ":", "_"))
	return path, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
  - name: realnode
    cluster: {server: %q, certificate-authority: %q}
contexts:
  - name: realnode
    context: {cluster: realnode, user: user}
current-context: realnode
users:
  - name: user
    user: {token: %q}
`, APIServer, n.CA(), token), 0o600)
}

// containerdConfig is Debian's containerd 1.6 (config version 2), everything under the node's
// directory except the shims' sockets, which it keeps in /run/containerd (the node's own /run).
func (n *Node) containerdConfig() string {
	dir := filepath.Join(n.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Nothing to send traces to.
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  enable_cdi = false
  # The CRI asks for oom_score_adj -998 for sandboxes; where root lacks CAP_SYS_RESOURCE (this
  # project's VMs) runc then fails every sandbox with "can't get final child's PID from pipe".
  # This keeps containers at containerd's own score instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
  # No mirror and no credentials: every image is imported, none is pulled.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.containerdSocket(), filepath.Join(dir, "opt"),
		PauseImage, filepath.Join(dir, "runc"), filepath.Join(n.Dir, "cni", "net.d"), filepath.Join(dir, "certs.d"))
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.Dir, "containerd", "containerd.sock")
}

// cniConfig is one bridge with host-local addresses. containerd brings up each pod's lo
// itself: chaining the loopback plugin would do it twice.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "realnode",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}
  }]
}
`, bridge, podCIDR, podGateway, filepath.Join(n.Dir, "cni", "ipam"))
}

// kubeletConfig: cgroupfs on the machine's cgroup v1, no swap check, the node's own DNS
// (serveDNS) and resolv.conf, and image garbage collection off (the images cannot be pulled
// again).
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
# See restrict_oom_score_adj in containerd's configuration.
oomScoreAdj: 0
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %q
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
rotateCertificates: false
`, n.containerdSocket(), NodeIP, n.CA(), NodeIP, strings.TrimSuffix(clusterDomain, "."), filepath.Join(n.Dir, "resolv.conf"))
}
