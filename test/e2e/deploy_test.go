// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector"
	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// kubectlBinary is kubectl of the API server's version (KUBECTL_BIN, else what
// test/kube/build-apiserver.sh kubectl built).
func kubectlBinary(tb testing.TB) string {
	return stack.Built(tb, "KUBECTL_BIN", "test/kube/build-apiserver.sh", "kubectl")
}

// overlays are what `make deploy OVERLAY=...` renders, and the base with every optional
// component.
var overlays = map[string]string{"base": "deploy/base", "edge": "deploy/overlays/edge", "scale-out": "deploy/overlays/scale-out", "components": "test/e2e/testdata/deploy-components"}

// render is `make render`: kubectl's own kustomize, allowed to read distro/ (the configurations
// are those files, not copies).
func render(tb testing.TB, dir string) []byte {
	tb.Helper()
	cmd := exec.Command(kubectlBinary(tb), "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir)
	cmd.Dir = repoRoot(tb)
	out, err := cmd.Output()
	require.NoError(tb, err, "kubectl kustomize %s: %s", dir, stderrOf(err))
	return out
}

func stderrOf(err error) string {
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(exit.Stderr)
	}
	return ""
}

// objects splits rendered manifests into objects.
func objects(tb testing.TB, manifests []byte) []*unstructured.Unstructured {
	tb.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(tb, err)
		if obj != nil {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

func convert[T any](tb testing.TB, obj *unstructured.Unstructured) *T {
	tb.Helper()
	out := new(T)
	require.NoError(tb, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out), "%s %s", obj.GetKind(), obj.GetName())
	return out
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// kubectl runs kubectl against the test's API server.
func kubectl(tb testing.TB, kubeconfig string, stdin []byte, args ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command(kubectlBinary(tb), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDeployManifests applies every overlay's rendered manifests, and the Secrets that
// deploy/secrets.sh makes, with `kubectl apply --dry-run=server` to a real kube-apiserver:
// schema (strict field validation), admission and RBAC errors fail it. The namespace is created
// for real first, since admission checks that it exists. A manifest with a mistake is rejected,
// so the check can fail.
func TestDeployManifests(t *testing.T) {
	cluster := kube.Start(t)
	admin := cluster.Kubeconfig("admin")
	secrets := deploySecrets(t)

	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			manifests := render(t, dir)
			namespaces := ofKind(objects(t, manifests), "Namespace")
			require.Len(t, namespaces, 1)
			ns, err := namespaces[0].MarshalJSON()
			require.NoError(t, err)
			out, err := kubectl(t, admin, ns, "apply", "-f", "-")
			require.NoError(t, err, out)

			out, err = kubectl(t, admin, manifests, "apply", "--dry-run=server", "-f", "-")
			require.NoError(t, err, out)
			for _, kind := range []string{"daemonset.apps/otelcol-gpu-agent", "serviceaccount/otelcol-gpu-agent"} {
				assert.Contains(t, out, kind+" created (server dry run)")
			}
			out, err = kubectl(t, admin, secrets, "apply", "--dry-run=server", "-f", "-")
			require.NoError(t, err, out)
			assert.Contains(t, out, "secret/otelcol-gpu-agent created (server dry run)")

			broken := bytes.Replace(manifests, []byte("hostPID: true"), []byte("hostPID: true\n      hostPIDs: true"), 1)
			require.NotEqual(t, manifests, broken)
			out, err = kubectl(t, admin, broken, "apply", "--dry-run=server", "-f", "-")
			assert.Error(t, err, "an unknown field must be rejected")
			assert.Contains(t, out, "hostPIDs")
		})
	}
}

// deploySecrets runs deploy/secrets.sh into a temporary directory.
func deploySecrets(tb testing.TB) []byte {
	tb.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(tb), "deploy", "secrets.sh"))
	cmd.Env = append(os.Environ(), "SECRETS_DIR="+tb.TempDir())
	out, err := cmd.Output()
	require.NoError(tb, err, "deploy/secrets.sh: %s", stderrOf(err))
	return out
}

// TestDeployRBAC applies the base's RBAC for real and asks the API server (kubectl auth can-i)
// what the gateway's and the agent's service accounts may do: the gateway reads pods and nodes
// and writes only what the GPU health writer needs (a node's status, Events in default, its
// one Lease), nothing else; the agent may do nothing at all. The quarantine component adds
// patch on nodes, and nothing else.
func TestDeployRBAC(t *testing.T) {
	cluster := kube.Start(t)
	admin := cluster.Kubeconfig("admin")
	rendered := objects(t, render(t, overlays["base"]))
	var rbac []byte
	for _, o := range rendered {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			j, err := o.MarshalJSON()
			require.NoError(t, err)
			rbac = append(append(rbac, j...), '\n')
		}
	}
	out, err := kubectl(t, admin, rbac, "apply", "-f", "-")
	require.NoError(t, err, out)

	// can asks the API server whether sa may verb resource (TYPE, TYPE/NAME, or
	// TYPE/subresource) in namespace, or in every namespace when namespace is empty.
	can := func(sa, verb, resource, namespace string) bool {
		args := []string{"auth", "can-i", verb, "--as=system:serviceaccount:otelcol-gpu:" + sa}
		if namespace == "" {
			args = append(args, "--all-namespaces")
		} else {
			args = append(args, "--namespace="+namespace)
		}
		if r, sub, ok := strings.Cut(resource, "/"); ok && !strings.Contains(r, ".") {
			args = append(args, r, "--subresource="+sub)
		} else {
			args = append(args, resource)
		}
		out, _ := kubectl(t, admin, nil, args...)
		return strings.TrimSpace(out) == "yes"
	}
	readers := []string{"get", "list", "watch"}
	writers := []string{"create", "update", "patch", "delete", "deletecollection"}
	for _, resource := range []string{"pods", "nodes"} {
		for _, verb := range readers {
			assert.True(t, can("otelcol-gpu-gateway", verb, resource, ""), "gateway %s %s", verb, resource)
		}
	}
	for _, resource := range []string{"pods", "nodes", "namespaces", "secrets", "configmaps", "pods/exec", "pods/log", "nodes/proxy", "events", "leases.coordination.k8s.io", "deployments.apps", "clusterroles.rbac.authorization.k8s.io"} {
		for _, verb := range writers {
			assert.False(t, can("otelcol-gpu-gateway", verb, resource, ""), "gateway %s %s", verb, resource)
			assert.False(t, can("otelcol-gpu-agent", verb, resource, ""), "agent %s %s", verb, resource)
		}
		if resource != "pods" && resource != "nodes" {
			assert.False(t, can("otelcol-gpu-gateway", "get", resource, ""), "gateway get %s", resource)
		}
		assert.False(t, can("otelcol-gpu-agent", "get", resource, ""), "agent get %s", resource)
	}

	// The one exception to a read-only gateway, the GPU health writer (health-rbac.yaml): a
	// node's status, Events where the API server keeps those of nodes, its Lease; nothing more.
	assert.True(t, can("otelcol-gpu-gateway", "patch", "nodes/status", ""))
	for _, verb := range []string{"update", "create", "delete"} {
		assert.False(t, can("otelcol-gpu-gateway", verb, "nodes/status", ""), "gateway %s nodes/status", verb)
	}
	for _, verb := range []string{"create", "patch"} {
		assert.True(t, can("otelcol-gpu-gateway", verb, "events", "default"), "gateway %s events in default", verb)
		assert.False(t, can("otelcol-gpu-gateway", verb, "events", "otelcol-gpu"), "gateway %s events in its namespace", verb)
		assert.False(t, can("otelcol-gpu-gateway", verb, "events", "kube-system"), "gateway %s events in kube-system", verb)
	}
	for _, verb := range []string{"get", "list", "watch", "update", "delete"} {
		assert.False(t, can("otelcol-gpu-gateway", verb, "events", "default"), "gateway %s events in default", verb)
	}
	assert.True(t, can("otelcol-gpu-gateway", "create", "leases.coordination.k8s.io", "otelcol-gpu"))
	for _, verb := range []string{"get", "update"} {
		assert.True(t, can("otelcol-gpu-gateway", verb, "leases.coordination.k8s.io/otelcol-gpu-health", "otelcol-gpu"), "gateway %s its Lease", verb)
		assert.False(t, can("otelcol-gpu-gateway", verb, "leases.coordination.k8s.io/kube-scheduler", "otelcol-gpu"), "gateway %s another Lease", verb)
		assert.False(t, can("otelcol-gpu-gateway", verb, "leases.coordination.k8s.io/otelcol-gpu-health", "kube-system"), "gateway %s a Lease elsewhere", verb)
	}
	for _, verb := range []string{"list", "watch", "patch", "delete"} {
		assert.False(t, can("otelcol-gpu-gateway", verb, "leases.coordination.k8s.io/otelcol-gpu-health", "otelcol-gpu"), "gateway %s its Lease", verb)
	}

	assert.False(t, can("otelcol-gpu-gateway", "patch", "nodes", ""), "no quarantine without its component")

	// The quarantine component adds patch on nodes, and nothing else.
	for _, o := range objects(t, render(t, overlays["components"])) {
		if strings.HasPrefix(o.GetName(), "otelcol-gpu-quarantine") {
			j, err := o.MarshalJSON()
			require.NoError(t, err)
			out, err := kubectl(t, admin, j, "apply", "-f", "-")
			require.NoError(t, err, out)
		}
	}
	assert.True(t, can("otelcol-gpu-gateway", "patch", "nodes", ""), "the quarantine's cordon, taint and annotation")
	for _, verb := range []string{"update", "delete", "create"} {
		assert.False(t, can("otelcol-gpu-gateway", verb, "nodes", ""), "gateway %s nodes with quarantine", verb)
	}
	// And one GPU out, not the node: the ResourceSlices to find a GPU's device (its
	// DeviceTaintRules' verbs are checked on the manifests below: this API server, without
	// DRA's device taints, does not serve them, and kubectl answers no for what it cannot map);
	// nothing more on DRA's objects.
	assert.True(t, can("otelcol-gpu-gateway", "list", "resourceslices.resource.k8s.io", ""))
	for _, resource := range []string{"resourceslices", "resourceclaims", "deviceclasses"} {
		for _, verb := range writers {
			assert.False(t, can("otelcol-gpu-gateway", verb, resource+".resource.k8s.io", ""), "gateway %s %s", verb, resource)
		}
	}
	for _, resource := range []string{"pods/eviction", "pods"} {
		assert.False(t, can("otelcol-gpu-gateway", "create", resource, ""), "no drain: gateway create %s", resource)
		assert.False(t, can("otelcol-gpu-gateway", "delete", resource, ""), "no drain: gateway delete %s", resource)
	}

	// The same, read from the manifests: no rule grants more than reading, but the writer's
	// own, the quarantine's and the validation gate's, and none a wildcard.
	exception := map[string][]string{
		"nodes/status": {"patch"}, "events": {"create", "patch"}, "leases": {"create", "get", "update"}, "nodes": {"patch"},
		"devicetaintrules": {"create", "delete", "get", "list"}, "resourceslices": {"list"},
	}
	rules := func(name string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			assert.Empty(t, rule.NonResourceURLs, name)
			assert.NotContains(t, rule.Resources, "*", name)
			assert.NotContains(t, rule.APIGroups, "*", name)
			for _, resource := range rule.Resources {
				allowed := readers
				if strings.HasPrefix(name, "otelcol-gpu-health") || name == "otelcol-gpu-quarantine" || name == "otelcol-gpu-validation-gate" {
					allowed = exception[resource]
				}
				for _, verb := range rule.Verbs {
					assert.Contains(t, allowed, verb, "%s: %s on %s", name, verb, resource)
				}
			}
		}
	}
	for _, o := range ofKind(append(rendered, objects(t, render(t, overlays["components"]))...), "ClusterRole") {
		role := convert[rbacv1.ClusterRole](t, o)
		rules(role.Name, role.Rules)
	}
	for _, o := range ofKind(rendered, "Role") {
		role := convert[rbacv1.Role](t, o)
		rules(role.Name, role.Rules)
	}
}

// TestDeployedConfigsValidate checks the collector configurations inside each overlay's
// ConfigMaps with `otelcol-gpu validate`, in the environment the manifests give the container:
// every ${env:...} a configuration reads must be set by its container.
func TestDeployedConfigsValidate(t *testing.T) {
	envRef := regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)`)
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, dir))
			configs := collectorConfigs(t, objs)
			var pods []corev1.PodSpec
			for _, o := range ofKind(objs, "DaemonSet") {
				pod := convert[appsv1.DaemonSet](t, o).Spec.Template.Spec
				// Every node runs the agent's own lean build, not the image's default entrypoint.
				assert.Equal(t, []string{"/otelcol-gpu-agent"}, pod.Containers[0].Command, "the DaemonSet's binary")
				pods = append(pods, pod)
			}
			for _, o := range ofKind(objs, "Deployment") {
				pods = append(pods, convert[appsv1.Deployment](t, o).Spec.Template.Spec)
			}
			require.Len(t, configs, len(pods), "one configuration per workload")
			for _, pod := range pods {
				config := configs[configMapOf(t, pod)]
				require.NotEmpty(t, config, "the ConfigMap of %s", pod.Containers[0].Name)
				container := pod.Containers[0]
				env := []string{}
				var names []string
				for _, e := range container.Env {
					names = append(names, e.Name)
					env = append(env, e.Name+"="+placeholder(e))
				}
				for _, ref := range envRef.FindAllStringSubmatch(config, -1) {
					assert.Contains(t, names, ref[1], "%s reads ${env:%s}, which its container does not set", container.Name, ref[1])
				}
				path := filepath.Join(t.TempDir(), "config.yaml")
				require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
				// The container's own arguments, its --config pointing at the ConfigMap's file.
				args := []string{"validate"}
				for _, arg := range container.Args {
					if strings.HasPrefix(arg, "--config=") {
						arg = "--config=" + path
					}
					args = append(args, arg)
				}
				require.Contains(t, args, "--config="+path)
				// Validation checks that the directories on the node are there: the host's / (the
				// DaemonSet's hostfs volume), node_exporter's textfile directory. Here: this
				// machine's / and a temporary directory.
				if strings.Contains(config, "root_path: /hostfs") {
					args = append(args, "--set", "receivers::task::root_path=/", "--set", "receivers::gpu::root_path=/",
						"--set", "processors::gpu_attribution::root_path=/")
				}
				if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "exporters::textfile::directory=") }) {
					args = append(args, "--set", "exporters::textfile::directory="+t.TempDir())
				}
				cmd := exec.Command(distributionOf(t, container), args...)
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.CombinedOutput()
				assert.NoError(t, err, "%s: %s", container.Name, out)
			}
		})
	}
}

// collectorConfigs maps each ConfigMap's name to its config.yaml.
func collectorConfigs(tb testing.TB, objs []*unstructured.Unstructured) map[string]string {
	configs := map[string]string{}
	for _, o := range ofKind(objs, "ConfigMap") {
		cm := convert[corev1.ConfigMap](tb, o)
		configs[cm.Name] = cm.Data["config.yaml"]
	}
	return configs
}

// distributionOf is the built binary that container runs: its command in the image
// (/otelcol-gpu-agent), else the image's entrypoint /otelcol-gpu.
func distributionOf(tb testing.TB, container corev1.Container) string {
	cmd := "/otelcol-gpu"
	if len(container.Command) > 0 {
		cmd = container.Command[0]
	}
	switch cmd {
	case "/otelcol-gpu":
		return stack.Binary(tb)
	case "/otelcol-gpu-agent":
		return stack.AgentBinary(tb)
	default:
		tb.Fatalf("%s runs %s, which the image does not hold", container.Name, cmd)
		return ""
	}
}

func configMapOf(tb testing.TB, pod corev1.PodSpec) string {
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "config" })
	require.GreaterOrEqual(tb, i, 0, "a volume named config")
	return pod.Volumes[i].ConfigMap.Name
}

// placeholder is what the downward API would give an environment variable.
func placeholder(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.ResourceFieldRef != nil:
		return "536870912"
	case e.ValueFrom.FieldRef != nil && strings.HasSuffix(e.ValueFrom.FieldRef.FieldPath, "IP"):
		return "10.0.0.1"
	default:
		return "node-1"
	}
}

// TestOneWatchdog checks the one-watchdog rule in every layout deploy/ renders: exactly one
// workload runs k8s_watchdog (its configuration's pipelines, as the container's --set arguments
// leave them), with one replica, and where the OTLP gateway is scaled out the watchdog is a
// Deployment of its own whose rollout never runs two (strategy Recreate). The edge overlay runs
// no gateway at all.
func TestOneWatchdog(t *testing.T) {
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, dir))
			configs := collectorConfigs(t, objs)
			var watchdogs []*appsv1.Deployment
			gatewayReplicas := int32(0)
			for _, o := range ofKind(objs, "Deployment") {
				d := convert[appsv1.Deployment](t, o)
				if runs(pipelinesOf(t, configs, d), "receivers", "k8s_watchdog") {
					watchdogs = append(watchdogs, d)
				} else {
					gatewayReplicas += *d.Spec.Replicas
				}
			}
			if name == "edge" {
				assert.Empty(t, watchdogs, "edge nodes run agents only")
				return
			}
			require.Len(t, watchdogs, 1, "one workload runs k8s_watchdog")
			assert.Equal(t, int32(1), *watchdogs[0].Spec.Replicas, "%s runs k8s_watchdog: one replica", watchdogs[0].Name)
			if gatewayReplicas > 0 {
				assert.Equal(t, appsv1.RecreateDeploymentStrategyType, watchdogs[0].Spec.Strategy.Type,
					"%s: a rolling update would run two watchdogs for a while", watchdogs[0].Name)
			}
		})
	}
}

// TestOneHealthWriter checks, in every layout, that the GPU health writer (k8s_gpu_health)
// runs in one workload, with one replica, and sees every node's health: every other gateway
// forwards the health data (metrics and logs, through gpu_health_filter) to the writer's
// Service, which selects the writer's pods.
func TestOneHealthWriter(t *testing.T) {
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, dir))
			configs := collectorConfigs(t, objs)
			var writers, forwarders []*appsv1.Deployment
			for _, o := range ofKind(objs, "Deployment") {
				d := convert[appsv1.Deployment](t, o)
				pipelines := pipelinesOf(t, configs, d)
				if runs(pipelines, "exporters", "k8s_gpu_health") {
					writers = append(writers, d)
					continue
				}
				forwarders = append(forwarders, d)
				for _, signal := range []string{"metrics", "logs"} {
					p := pipelines[signal+"/gpu_health"]
					assert.Equal(t, []string{"otlp"}, p.Receivers, "%s forwards the agents' %s", d.Name, signal)
					assert.Equal(t, []string{"memory_limiter", "gpu_health_filter"}, p.Processors, "%s forwards the health data alone", d.Name)
					assert.Equal(t, []string{"otlp_grpc/gpu_health"}, p.Exporters, "%s forwards to the writer", d.Name)
				}
			}
			if name == "edge" {
				assert.Empty(t, writers, "edge nodes run agents only")
				return
			}
			require.Len(t, writers, 1, "one workload writes the GPU health")
			writer := writers[0]
			assert.Equal(t, int32(1), *writer.Spec.Replicas)
			if len(forwarders) == 0 {
				return
			}
			var gateway struct {
				Exporters map[string]struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"exporters"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(configs[configMapOf(t, forwarders[0].Spec.Template.Spec)]), &gateway))
			service, _, ok := strings.Cut(gateway.Exporters["otlp_grpc/gpu_health"].Endpoint, ".")
			require.True(t, ok, "the forwarding's endpoint names a Service")
			i := slices.IndexFunc(ofKind(objs, "Service"), func(o *unstructured.Unstructured) bool { return o.GetName() == service })
			require.GreaterOrEqual(t, i, 0, "the Service %s the gateways forward to", service)
			selector := convert[corev1.Service](t, ofKind(objs, "Service")[i]).Spec.Selector
			for k, v := range selector {
				assert.Equal(t, v, writer.Spec.Template.Labels[k], "%s selects the writer's pods", service)
			}
			assert.Equal(t, []corev1.ServicePort{{Name: "otlp-grpc", Port: 4317, TargetPort: intstr.FromString("otlp-grpc")}},
				convert[corev1.Service](t, ofKind(objs, "Service")[i]).Spec.Ports)
		})
	}
}

// pipeline is a collector's pipeline as its configuration and --set arguments leave it.
type pipeline struct {
	Receivers, Processors, Exporters []string
}

// pipelinesOf are a gateway Deployment's pipelines: its ConfigMap's, with the container's
// --set=service::pipelines::<name>::<field>=[...] arguments applied.
func pipelinesOf(t *testing.T, configs map[string]string, d *appsv1.Deployment) map[string]pipeline {
	t.Helper()
	var cfg struct {
		Service struct {
			Pipelines map[string]pipeline `yaml:"pipelines"`
		} `yaml:"service"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(configs[configMapOf(t, d.Spec.Template.Spec)]), &cfg))
	pipelines := cfg.Service.Pipelines
	set := regexp.MustCompile(`^--set=service::pipelines::([^:]+)::(receivers|processors|exporters)=\[(.*)\]$`)
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		m := set.FindStringSubmatch(arg)
		if m == nil {
			continue
		}
		p := pipelines[m[1]]
		names := strings.Split(strings.ReplaceAll(m[3], " ", ""), ",")
		switch m[2] {
		case "receivers":
			p.Receivers = names
		case "processors":
			p.Processors = names
		case "exporters":
			p.Exporters = names
		}
		pipelines[m[1]] = p
	}
	return pipelines
}

// runs reports whether a pipeline has component among its receivers or exporters (field).
func runs(pipelines map[string]pipeline, field, component string) bool {
	for _, p := range pipelines {
		names := p.Receivers
		if field == "exporters" {
			names = p.Exporters
		}
		if slices.Contains(names, component) {
			return true
		}
	}
	return false
}

// TestAgentMemorySettings keeps the DaemonSet's memory settings in step with each other: the
// container's limit holds the Go runtime's soft limit (GOMEMLIMIT) plus the agent binary's pages,
// which are resident and charged to the container too; and the runtime collects harder before
// memory_limiter starts refusing data (its soft limit: limit_percentage less
// spike_limit_percentage of the container's limit).
func TestAgentMemorySettings(t *testing.T) {
	binary, err := os.Stat(stack.AgentBinary(t))
	require.NoError(t, err)
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, dir))
			configs := collectorConfigs(t, objs)
			for _, o := range ofKind(objs, "DaemonSet") {
				pod := convert[appsv1.DaemonSet](t, o).Spec.Template.Spec
				container := pod.Containers[0]
				limit, ok := container.Resources.Limits[corev1.ResourceMemory]
				require.True(t, ok, "%s has a memory limit", container.Name)
				env := map[string]string{}
				for _, e := range container.Env {
					if e.Name == "GOMEMLIMIT" || e.Name == "GOGC" {
						require.Nil(t, e.ValueFrom, "%s: %s is a value in the manifest, next to the limit", container.Name, e.Name)
					}
					env[e.Name] = e.Value
				}
				assert.NotEmpty(t, env["GOGC"], "%s sets GOGC", container.Name)
				goLimit, err := goMemoryLimit(env["GOMEMLIMIT"])
				require.NoError(t, err, "%s: GOMEMLIMIT", container.Name)
				assert.LessOrEqual(t, goLimit+binary.Size(), limit.Value(),
					"%s: GOMEMLIMIT %s and the binary's %d bytes must fit in the limit %s", container.Name, env["GOMEMLIMIT"], binary.Size(), limit.String())

				var config struct {
					Processors struct {
						MemoryLimiter struct {
							LimitPercentage      int64 `yaml:"limit_percentage"`
							SpikeLimitPercentage int64 `yaml:"spike_limit_percentage"`
						} `yaml:"memory_limiter"`
					} `yaml:"processors"`
				}
				require.NoError(t, yaml.Unmarshal([]byte(configs[configMapOf(t, pod)]), &config))
				ml := config.Processors.MemoryLimiter
				require.Positive(t, ml.LimitPercentage, "%s: memory_limiter's limit_percentage", container.Name)
				assert.Less(t, goLimit, limit.Value()*(ml.LimitPercentage-ml.SpikeLimitPercentage)/100,
					"%s: GOMEMLIMIT must be under memory_limiter's soft limit", container.Name)
			}
		})
	}
}

// goMemoryLimit parses GOMEMLIMIT as the Go runtime does: a number of bytes with an optional
// B, KiB, MiB, GiB or TiB suffix.
func goMemoryLimit(v string) (int64, error) {
	for i, suffix := range []string{"TiB", "GiB", "MiB", "KiB", "B", ""} {
		if n, ok := strings.CutSuffix(v, suffix); ok && n != "" {
			count, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, err
			}
			if suffix == "" || suffix == "B" {
				return count, nil
			}
			return count << (10 * (4 - i)), nil
		}
	}
	return 0, fmt.Errorf("%q is not a GOMEMLIMIT", v)
}

// TestAgentToleratesTheWritersTaints: the agent runs on a node the GPU health writer took out of
// service (quarantine) or holds (validation gate), with either taint at every effect, so that a
// pod of the agent made anew meanwhile (a rollout) still lands there and reports the health that
// lets the node back; without it the node would wait for a person. The chart's values are the
// same (TestHelmMatchesKustomize).
func TestAgentToleratesTheWritersTaints(t *testing.T) {
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			daemonSets := ofKind(objects(t, render(t, dir)), "DaemonSet")
			require.NotEmpty(t, daemonSets)
			for _, o := range daemonSets {
				pod := convert[appsv1.DaemonSet](t, o).Spec.Template.Spec
				for _, key := range []string{k8sgpuhealthconnector.TaintKey, k8sgpuhealthconnector.ValidationTaintKey} {
					for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute} {
						taint := &corev1.Taint{Key: key, Value: "reboot", Effect: effect}
						assert.True(t, slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
							return tol.ToleratesTaint(klog.Background(), taint, false)
						}), "%s tolerates %s:%s", o.GetName(), key, effect)
					}
				}
			}
		})
	}
}
