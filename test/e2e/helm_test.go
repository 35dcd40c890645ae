// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/otelcol-gpu/otelcol-gpu/test/kube"
	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// chart is the Helm chart of deploy/'s objects.
const chart = "deploy/helm/otelcol-gpu"

// chartValues are the Helm values that choose what each entry of overlays renders. The edge
// gateway's address and the store's URL are the placeholders the overlays ship.
var chartValues = map[string][]string{
	"base":      nil,
	"edge":      {"layout=edge", "agent.gateway=otelcol-gpu-gateway.example.com"},
	"scale-out": {"layout=scale-out", "scaleOut.remoteWriteEndpoint=http://mimir-distributor.monitoring:8080/api/v1/push"},
	"components": {
		"agent.runtimeClassName=nvidia", "textfile.enabled=true", "quarantine.enabled=true", "validationGate.enabled=true",
		// deploy/components/prometheus-otlp: its flags in gateway.extraArgs, as its comment says
		// (Helm's --set takes \, for a comma inside a value).
		`gateway.extraArgs={` +
			`--set=service::pipelines::metrics::processors=[memory_limiter\,resource/prometheus],` +
			`--set=service::pipelines::metrics::exporters=[otlp_http/prometheus\,k8s_gpu_health],` +
			`--set=service::pipelines::metrics/gpu_health::processors=[resource/prometheus],` +
			`--set=service::pipelines::metrics/gpu_health::exporters=[otlp_http/prometheus],` +
			`--set=exporters::otlp_http/prometheus::metrics_endpoint=http://prometheus.monitoring:9090/api/v1/otlp/v1/metrics}`,
	},
}

// monitoring are the chart's switches for prometheus-operator and Grafana's sidecar, in the
// combinations that may be installed together (the two monitor kinds scrape the same pods).
var monitoring = map[string][]string{
	"serviceMonitor": {"serviceMonitor.enabled=true", "prometheusRule.enabled=true", "dashboards.enabled=true"},
	"podMonitor":     {"podMonitor.enabled=true"},
}

// helm runs helm (HELM_BIN: v3.22.0, built by test/helm/build-helm.sh) in the repository's root
// and returns its standard output; its standard error, where Helm notes each symbolic link it
// follows in the chart, is in the error.
func helm(tb testing.TB, args ...string) ([]byte, error) {
	tb.Helper()
	cmd := exec.Command(stack.Built(tb, "HELM_BIN", "test/helm/build-helm.sh"), args...)
	cmd.Dir = repoRoot(tb)
	// Helm's own configuration, caches and repositories: none of the user's.
	home := tb.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderrOf(err))
	}
	return out, err
}

// helmTemplate renders the chart as release otelcol-gpu in namespace otelcol-gpu (deploy/'s),
// with --set values.
func helmTemplate(tb testing.TB, values ...string) []byte {
	tb.Helper()
	out, err := helm(tb, append([]string{"template", "otelcol-gpu", chart, "--namespace", "otelcol-gpu"}, setFlags(values)...)...)
	require.NoError(tb, err)
	return out
}

// TestHelmMatchesKustomize renders each of deploy/'s layouts with kustomize and the chart with
// the matching values, and compares them object by object. What may differ:
//   - Helm's own labels on each object, helm.sh/chart and app.kubernetes.io/managed-by (and
//     nothing else of Helm's: no app.kubernetes.io/instance, which deploy/ uses for its own
//     meaning);
//   - the Namespace: a chart does not own the namespace it is installed into; the install
//     (deploy/README.md) applies deploy/base/namespace.yaml, the same object, before it;
//   - how a changed configuration rolls the pods: kustomize's configMapGenerator names each
//     ConfigMap with a hash of its data (otelcol-gpu-agent-<hash>), the chart keeps the name and
//     puts the configuration's checksum in the pod template's annotation checksum/config. The
//     hash suffix is removed from kustomize's names and references, and the annotation from
//     Helm's pods after checking that it is the checksum of the configuration the pod mounts;
//   - the order of a pod's volumes and of its containers' env: a strategic merge patch (the edge
//     overlay's) moves the entries it patches to the front. Both lists are sorted by name, which
//     loses nothing: volumes are found by name, and no variable refers to another ($(NAME)).
func TestHelmMatchesKustomize(t *testing.T) {
	require.ElementsMatch(t, slices.Collect(maps.Keys(overlays)), slices.Collect(maps.Keys(chartValues)), "Helm values for each layout")
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			kustomized := map[string]*unstructured.Unstructured{}
			generated := regexp.MustCompile(`^(.+)-[0-9a-z]{10}$`)
			configMaps := map[string]string{}
			for _, o := range objects(t, render(t, dir)) {
				switch o.GetKind() {
				case "Namespace":
					continue
				case "ConfigMap":
					m := generated.FindStringSubmatch(o.GetName())
					require.NotNil(t, m, "%s is named by kustomize's configMapGenerator", o.GetName())
					configMaps[o.GetName()] = m[1]
					o.SetName(m[1])
				}
				kustomized[objectID(o)] = o
			}
			for _, o := range kustomized {
				forEachPod(t, o, func(pod map[string]any) {
					for _, v := range pod["spec"].(map[string]any)["volumes"].([]any) {
						if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
							cm["name"] = configMaps[cm["name"].(string)]
						}
					}
					sortByName(t, pod)
				})
			}

			helmed := map[string]*unstructured.Unstructured{}
			objs := objects(t, helmTemplate(t, chartValues[name]...))
			configs := collectorConfigs(t, objs)
			for _, o := range objs {
				labels := o.GetLabels()
				assert.Equal(t, "otelcol-gpu-0.1.0", labels["helm.sh/chart"], "%s: Helm's label", objectID(o))
				assert.Equal(t, "Helm", labels["app.kubernetes.io/managed-by"], "%s: Helm's label", objectID(o))
				delete(labels, "helm.sh/chart")
				delete(labels, "app.kubernetes.io/managed-by")
				o.SetLabels(labels)
				forEachPod(t, o, func(pod map[string]any) {
					meta := pod["metadata"].(map[string]any)
					annotations, _ := meta["annotations"].(map[string]any)
					spec := convert[corev1.PodSpec](t, &unstructured.Unstructured{Object: pod["spec"].(map[string]any)})
					sum := sha256.Sum256([]byte(configs[configMapOf(t, *spec)]))
					assert.Equal(t, hex.EncodeToString(sum[:]), annotations["checksum/config"], "%s rolls when its configuration changes", objectID(o))
					delete(annotations, "checksum/config")
					if len(annotations) == 0 {
						delete(meta, "annotations")
					}
					sortByName(t, pod)
				})
				helmed[objectID(o)] = o
			}

			require.ElementsMatch(t, slices.Collect(maps.Keys(kustomized)), slices.Collect(maps.Keys(helmed)), "the same objects")
			for id, want := range kustomized {
				assert.Equal(t, yamlOf(t, want.Object), yamlOf(t, helmed[id].Object), id)
			}
		})
	}
}

func objectID(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// forEachPod calls f with the pod template of a workload.
func forEachPod(tb testing.TB, o *unstructured.Unstructured, f func(pod map[string]any)) {
	tb.Helper()
	if o.GetKind() != "DaemonSet" && o.GetKind() != "Deployment" {
		return
	}
	pod, found, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "template")
	require.NoError(tb, err)
	require.True(tb, found, "%s has a pod template", objectID(o))
	f(pod.(map[string]any))
}

// sortByName sorts a pod template's volumes and its containers' env by name, after checking
// that no variable refers to another, which would make their order matter.
func sortByName(tb testing.TB, pod map[string]any) {
	tb.Helper()
	byName := func(a, b any) int {
		return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
	}
	spec := pod["spec"].(map[string]any)
	slices.SortFunc(spec["volumes"].([]any), byName)
	for _, c := range spec["containers"].([]any) {
		env := c.(map[string]any)["env"].([]any)
		for _, e := range env {
			value, _ := e.(map[string]any)["value"].(string)
			require.NotContains(tb, value, "$(", "a variable that refers to another")
		}
		slices.SortFunc(env, byName)
	}
}

// yamlOf is an object as YAML with sorted keys, so that a difference reads as a diff.
func yamlOf(tb testing.TB, v any) string {
	tb.Helper()
	out, err := yaml.Marshal(v)
	require.NoError(tb, err)
	return string(out)
}

// TestHelmLint runs `helm lint --strict` (the values' schema, the templates, and what they render)
// with each layout's values and the monitoring switches, and shows that a misspelled key, a value
// of the wrong type or out of its set, a value the layout needs left empty and both monitor kinds
// at once fail lint and install both, naming the key. The schema says so, not the templates:
// lint reports a template's `required` or `fail` as information and passes.
func TestHelmLint(t *testing.T) {
	for name, values := range chartValues {
		for switches, more := range monitoring {
			t.Run(name+"/"+switches, func(t *testing.T) {
				out, err := helm(t, append([]string{"lint", "--strict", chart}, setFlags(append(slices.Clone(values), more...))...)...)
				require.NoError(t, err, "%s", out)
			})
		}
	}
	for _, tc := range []struct {
		values []string
		says   string
	}{
		{[]string{"agent.tolerations[0].operater=Exists"}, "operater"},
		{[]string{"agent.nodeselector.gpu=true"}, "nodeselector"},
		{[]string{"serviceMonitor.enable=true"}, "enable"},
		{[]string{"layout=edges"}, "layout"},
		{[]string{"edge.queueSize=2GiB"}, "queueSize"},
		{[]string{"layout=edge"}, "/agent/gateway"},
		{[]string{"layout=scale-out"}, "/scaleOut/remoteWriteEndpoint"},
		{[]string{"serviceMonitor.enabled=true", "podMonitor.enabled=true"}, "/podMonitor/enabled"},
		{[]string{"layout=edge", "agent.gateway=gateway.example.com", "quarantine.enabled=true"}, "/quarantine/enabled"},
		{[]string{"quarantine.dryRun=no"}, "dryRun"},
		{[]string{"layout=edge", "agent.gateway=gateway.example.com", "validationGate.enabled=true"}, "/validationGate/enabled"},
	} {
		t.Run(strings.Join(tc.values, ","), func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chart}, setFlags(tc.values)...)...)
			require.Error(t, err, "helm lint must refuse %v", tc.values)
			assert.Contains(t, string(out)+err.Error(), tc.says)
			_, err = helm(t, append([]string{"template", "otelcol-gpu", chart}, setFlags(tc.values)...)...)
			require.Error(t, err, "helm template must refuse %v", tc.values)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// chartLinks are the chart's files: links to the files of deploy/ and distro/ they are, so that
// the chart carries no copy of a rule, a dashboard or a configuration (Helm reads only files
// inside the chart, and follows links).
var chartLinks = map[string]string{
	"agent.yaml":   "distro/agent.yaml",
	"gateway.yaml": "distro/gateway.yaml",
	"rules":        "deploy/prometheus/rules",
	"grafana":      "deploy/grafana",
}

// TestHelmChartSources: the chart's files/ holds only links to deploy/'s and distro/'s files (a
// copy in place of a link fails), and `helm package` follows them: the archive users install
// holds those files byte for byte, the rules' tests left out (.helmignore).
func TestHelmChartSources(t *testing.T) {
	root := repoRoot(t)
	entries, readErr := os.ReadDir(filepath.Join(root, chart, "files"))
	require.NoError(t, readErr)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(chartLinks)), names, "files/ holds the links and nothing else")
	want := map[string][]byte{}
	for name, source := range chartLinks {
		path := filepath.Join(root, chart, "files", name)
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&os.ModeSymlink, "files/%s must be a link to %s, not a copy", name, source)
		target, err := filepath.EvalSymlinks(path)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(root, source), target, "files/%s", name)

		sources := []string{source}
		switch name {
		case "rules":
			sources, err = filepath.Glob(filepath.Join(root, source, "*.yaml"))
		case "grafana":
			sources, err = filepath.Glob(filepath.Join(root, source, "*.json"))
		default:
			sources[0] = filepath.Join(root, source)
		}
		require.NoError(t, err)
		require.NotEmpty(t, sources)
		for _, s := range sources {
			in := "files/" + name
			if s != filepath.Join(root, source) {
				in += "/" + filepath.Base(s)
			}
			want[in] = mustRead(t, s)
		}
	}

	dir := t.TempDir()
	_, err := helm(t, "package", chart, "--destination", dir)
	require.NoError(t, err)
	packaged := chartArchive(t, filepath.Join(dir, "otelcol-gpu-0.1.0.tgz"))
	got := map[string][]byte{}
	for path, content := range packaged {
		if strings.HasPrefix(path, "files/") {
			got[path] = content
		}
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(got)), "the packaged chart's files/")
	for path, content := range want {
		assert.Equal(t, string(content), string(got[path]), path)
	}
}

// chartArchive reads a packaged chart: each regular file's path under the chart's directory, and
// its contents. Anything else in it (a link) fails.
func chartArchive(tb testing.TB, path string) map[string][]byte {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(tb, err)
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(tb, err)
		require.Equal(tb, byte(tar.TypeReg), h.Typeflag, "%s is a file", h.Name)
		content, err := io.ReadAll(tr)
		require.NoError(tb, err)
		files[strings.TrimPrefix(h.Name, "otelcol-gpu/")] = content
	}
}

// TestHelmManifests applies the chart's objects in every layout, with the monitoring switches,
// with `kubectl apply --dry-run=server` to a real kube-apiserver with prometheus-operator's CRDs
// (helmCluster): schema (strict field validation, the CRDs' schemas for the ServiceMonitors,
// PodMonitors and PrometheusRule), admission and RBAC errors fail it. A misspelled field is refused.
func TestHelmManifests(t *testing.T) {
	admin := helmCluster(t)
	for name, values := range chartValues {
		for switches, more := range monitoring {
			t.Run(name+"/"+switches, func(t *testing.T) {
				manifests := helmTemplate(t, append(slices.Clone(values), more...)...)
				out, err := kubectl(t, admin, manifests, "apply", "--dry-run=server", "-f", "-")
				require.NoError(t, err, out)
				created := []string{"daemonset.apps/otelcol-gpu-agent", "configmap/otelcol-gpu-agent"}
				switch switches {
				case "serviceMonitor":
					created = append(created, "servicemonitor.monitoring.coreos.com/otelcol-gpu-agent",
						"prometheusrule.monitoring.coreos.com/otelcol-gpu", "configmap/otelcol-gpu-dashboard-node")
				case "podMonitor":
					created = append(created, "podmonitor.monitoring.coreos.com/otelcol-gpu-agent")
				}
				for _, object := range created {
					assert.Contains(t, out, object+" created (server dry run)")
				}
			})
		}
	}

	manifests := helmTemplate(t, monitoring["podMonitor"]...)
	broken := bytes.Replace(manifests, []byte("honorLabels: true"), []byte("honorLabel: true"), 1)
	require.NotEqual(t, manifests, broken)
	out, err := kubectl(t, admin, broken, "apply", "--dry-run=server", "-f", "-")
	assert.Error(t, err, "an unknown field of a PodMonitor must be refused")
	assert.Contains(t, out, "honorLabel")
}

// helmCluster starts a real kube-apiserver with prometheus-operator's CRDs for ServiceMonitors,
// PodMonitors and PrometheusRules (PROMETHEUS_OPERATOR_CRDS: v0.85.0's, read from the Go module
// cache, found by test/helm/build-helm.sh crds) and the namespace made from
// deploy/base/namespace.yaml, as the install does, and returns the admin's kubeconfig.
func helmCluster(tb testing.TB) string {
	tb.Helper()
	crds := os.Getenv("PROMETHEUS_OPERATOR_CRDS")
	require.NotEmpty(tb, crds, "set PROMETHEUS_OPERATOR_CRDS=$(test/helm/build-helm.sh crds)")
	admin := kube.Start(tb).Kubeconfig("admin")
	var established []string
	for _, kind := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		out, err := kubectl(tb, admin, nil, "create", "-f", filepath.Join(crds, "monitoring.coreos.com_"+kind+".yaml"))
		require.NoError(tb, err, out)
		established = append(established, "crd/"+kind+".monitoring.coreos.com")
	}
	out, err := kubectl(tb, admin, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, established...)...)
	require.NoError(tb, err, "the CRDs are not established after a minute: %s", out)
	out, err = kubectl(tb, admin, nil, "apply", "-f", filepath.Join(repoRoot(tb), "deploy", "base", "namespace.yaml"))
	require.NoError(tb, err, out)
	return admin
}

// TestHelmInstall installs, upgrades and uninstalls the chart as deploy/README.md says, with
// helm against a real kube-apiserver (no kubelet: the pods are not run, the objects are made).
// A second release in another namespace is refused: the chart installs once per cluster. A
// change of layout from cluster to scale-out needs the gateway's Deployment deleted first.
// Uninstalling leaves nothing of the release but the namespace, which was there before.
func TestHelmInstall(t *testing.T) {
	admin := helmCluster(t)
	release := func(args ...string) (string, error) {
		out, err := helm(t, append(args, "--kubeconfig", admin)...)
		return string(out), err
	}
	made := func() string {
		out, err := kubectl(t, admin, nil, "get", "--ignore-not-found", "--output=name", "--all-namespaces",
			"--selector=app.kubernetes.io/part-of=otelcol-gpu",
			"daemonsets,deployments,services,configmaps,serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings,servicemonitors,podmonitors,prometheusrules")
		require.NoError(t, err, out)
		return out
	}

	out, err := release(append([]string{"install", "otelcol-gpu", chart, "--namespace", "otelcol-gpu"}, setFlags(monitoring["serviceMonitor"])...)...)
	require.NoError(t, err, out)
	for _, object := range []string{
		"daemonset.apps/otelcol-gpu-agent", "deployment.apps/otelcol-gpu-gateway", "clusterrole.rbac.authorization.k8s.io/otelcol-gpu-gateway",
		"servicemonitor.monitoring.coreos.com/otelcol-gpu", "prometheusrule.monitoring.coreos.com/otelcol-gpu", "configmap/otelcol-gpu-dashboard-node",
	} {
		assert.Contains(t, made(), object)
	}

	_, err = release("install", "again", chart, "--namespace", "elsewhere", "--create-namespace")
	require.Error(t, err, "a second installation in the cluster")
	assert.Contains(t, err.Error(), `ClusterRole "otelcol-gpu-gateway" in namespace "" exists`)

	// The gateway's limit raised with the cluster (deploy/README.md, "Resources"), the monitoring
	// switches left off.
	out, err = release("upgrade", "otelcol-gpu", chart, "--namespace", "otelcol-gpu", "--set", "gateway.resources.limits.memory=4Gi")
	require.NoError(t, err, out)
	assert.NotContains(t, made(), "servicemonitor", "switched off by the upgrade")
	out, err = kubectl(t, admin, nil, "get", "deployment", "otelcol-gpu-gateway", "--namespace", "otelcol-gpu",
		"--output=jsonpath={.spec.template.spec.containers[0].resources.limits.memory}")
	require.NoError(t, err, out)
	assert.Equal(t, "4Gi", out)

	// Another layout: the scale-out gateway selects its pods by one more label, and a
	// Deployment's selector cannot change, so the gateway is deleted first (deploy/README.md).
	_, err = release(append([]string{"upgrade", "otelcol-gpu", chart, "--namespace", "otelcol-gpu"}, setFlags(chartValues["scale-out"])...)...)
	require.Error(t, err, "the gateway's selector changes")
	assert.Contains(t, err.Error(), "field is immutable")
	out, err = kubectl(t, admin, nil, "delete", "deployment", "otelcol-gpu-gateway", "--namespace", "otelcol-gpu")
	require.NoError(t, err, out)
	out, err = release(append([]string{"upgrade", "otelcol-gpu", chart, "--namespace", "otelcol-gpu"}, setFlags(chartValues["scale-out"])...)...)
	require.NoError(t, err, out)
	assert.Contains(t, made(), "deployment.apps/otelcol-gpu-watchdog")

	out, err = release("uninstall", "otelcol-gpu", "--namespace", "otelcol-gpu")
	require.NoError(t, err, out)
	assert.Empty(t, made(), "what the release made is gone")
}

// setFlags are helm's --set flags for values.
func setFlags(values []string) []string {
	var flags []string
	for _, v := range values {
		flags = append(flags, "--set", v)
	}
	return flags
}

// TestHelmPrometheusRule: the chart's PrometheusRule holds exactly the groups of
// deploy/prometheus/rules/*.yaml, the files promtool tests, in the order of their names.
func TestHelmPrometheusRule(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "prometheus", "rules", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var want []any
	for _, f := range files {
		var doc struct {
			Groups []any `yaml:"groups"`
		}
		require.NoError(t, yaml.Unmarshal(mustRead(t, f), &doc), f)
		require.NotEmpty(t, doc.Groups, f)
		want = append(want, doc.Groups...)
	}
	rules := ofKind(objects(t, helmTemplate(t, "prometheusRule.enabled=true", "prometheusRule.labels.release=prometheus")), "PrometheusRule")
	require.Len(t, rules, 1)
	assert.Equal(t, "prometheus", rules[0].GetLabels()["release"], "the labels a Prometheus' ruleSelector selects")
	got, found, err := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	require.NoError(t, err)
	require.True(t, found, "spec.groups")
	// Through JSON, so that both sides' numbers have one type.
	assert.Equal(t, yamlOf(t, viaJSON(t, want)), yamlOf(t, viaJSON(t, got)))
}

func viaJSON(tb testing.TB, v any) any {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	var out any
	require.NoError(tb, json.Unmarshal(b, &out))
	return out
}

// TestHelmDashboards: each dashboard of deploy/grafana is in a ConfigMap of its own, unchanged,
// with the labels and annotations Grafana's sidecar is told to look for.
func TestHelmDashboards(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "grafana", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	want := map[string]string{}
	for _, f := range files {
		want[filepath.Base(f)] = string(mustRead(t, f))
	}
	got := map[string]string{}
	objs := objects(t, helmTemplate(t, "dashboards.enabled=true", "dashboards.annotations.grafana_folder=GPU", "dashboards.namespace=monitoring"))
	for _, o := range ofKind(objs, "ConfigMap") {
		if o.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		cm := convert[corev1.ConfigMap](t, o)
		require.Len(t, cm.Data, 1, "one dashboard in %s", cm.Name)
		assert.Equal(t, "monitoring", cm.Namespace, "the namespace Grafana's sidecar searches")
		assert.Equal(t, "GPU", cm.Annotations["grafana_folder"], cm.Name)
		maps.Copy(got, cm.Data)
	}
	assert.Equal(t, want, got)
}

// scrapeJob is a job of deploy/prometheus/scrape-configs.yaml, as far as the chart's monitors
// repeat it.
type scrapeJob struct {
	JobName     string `yaml:"job_name"`
	HonorLabels bool   `yaml:"honor_labels"`
	SD          []struct {
		Role       string `yaml:"role"`
		Namespaces struct {
			Names []string `yaml:"names"`
		} `yaml:"namespaces"`
		Selectors []struct {
			Label string `yaml:"label"`
		} `yaml:"selectors"`
	} `yaml:"kubernetes_sd_configs"`
	RelabelConfigs []relabeling `yaml:"relabel_configs"`
}

// relabeling is a relabelling rule as Prometheus' configuration writes it (yaml) and
// prometheus-operator's objects do (json).
type relabeling struct {
	Action       string   `yaml:"action" json:"action"`
	SourceLabels []string `yaml:"source_labels" json:"sourceLabels"`
	Regex        string   `yaml:"regex" json:"regex"`
	TargetLabel  string   `yaml:"target_label" json:"targetLabel"`
	Replacement  string   `yaml:"replacement" json:"replacement"`
}

// monitorSpec is the spec of a ServiceMonitor (endpoints) or a PodMonitor (podMetricsEndpoints).
type monitorSpec struct {
	NamespaceSelector struct {
		MatchNames []string `json:"matchNames"`
	} `json:"namespaceSelector"`
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Endpoints           []monitorEndpoint `json:"endpoints"`
	PodMetricsEndpoints []monitorEndpoint `json:"podMetricsEndpoints"`
}

type monitorEndpoint struct {
	Port        string       `json:"port"`
	HonorLabels bool         `json:"honorLabels"`
	Relabelings []relabeling `json:"relabelings"`
}

// operatorTargetLabels are the labels prometheus-operator v0.85 gives every target of a
// ServiceMonitor or PodMonitor (pkg/prometheus/promcfg.go, generateServiceMonitorConfig and
// generatePodMonitorConfig), besides job and instance.
var operatorTargetLabels = []string{"namespace", "service", "pod", "container", "endpoint"}

// TestHelmMonitors: each ServiceMonitor and PodMonitor of the chart scrapes what its job in
// deploy/prometheus/scrape-configs.yaml scrapes, with the same labels. For each job: a monitor
// named after it, which sets the job label to its name (alert rules select it); the same
// namespace; the same pods (a PodMonitor's selector, or the Service a ServiceMonitor selects
// narrowed by its keep rules on the pods' labels) and port; honor_labels as the job has it (the
// gateway's job keeps each node's instance); the job's own relabelling in order; and of the
// labels prometheus-operator adds to each target, those the job does not set dropped, so that
// a series carries the labels it carries from the shipped job.
func TestHelmMonitors(t *testing.T) {
	var shipped struct {
		ScrapeConfigs []scrapeJob `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(mustRead(t, filepath.Join(repoRoot(t), "deploy", "prometheus", "scrape-configs.yaml")), &shipped))
	require.NotEmpty(t, shipped.ScrapeConfigs)
	var jobNames []string
	for _, job := range shipped.ScrapeConfigs {
		jobNames = append(jobNames, job.JobName)
	}
	metaLabel := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	podLabel := func(label string) string {
		return "__meta_kubernetes_pod_label_" + metaLabel.ReplaceAllString(label, "_")
	}

	for kind, values := range map[string][]string{"ServiceMonitor": {"serviceMonitor.enabled=true"}, "PodMonitor": {"podMonitor.enabled=true"}} {
		t.Run(kind, func(t *testing.T) {
			objs := objects(t, helmTemplate(t, values...))
			monitors := map[string]monitorSpec{}
			for _, o := range ofKind(objs, kind) {
				var spec monitorSpec
				require.NoError(t, json.Unmarshal([]byte(jsonOf(t, o.Object["spec"])), &spec))
				monitors[o.GetName()] = spec
			}
			require.ElementsMatch(t, jobNames, slices.Collect(maps.Keys(monitors)), "a %s for each shipped job, named after it", kind)

			for _, job := range shipped.ScrapeConfigs {
				t.Run(job.JobName, func(t *testing.T) {
					m := monitors[job.JobName]
					endpoints := slices.Concat(m.Endpoints, m.PodMetricsEndpoints)
					require.Len(t, endpoints, 1)
					ep := endpoints[0]
					require.Len(t, job.SD, 1)
					require.Len(t, job.SD[0].Selectors, 1)
					require.Equal(t, "pod", job.SD[0].Role)
					assert.Equal(t, job.SD[0].Namespaces.Names, m.NamespaceSelector.MatchNames, "namespaces")
					assert.Equal(t, job.HonorLabels, ep.HonorLabels, "honor_labels")

					wantPods := map[string]string{}
					for pair := range strings.SplitSeq(job.SD[0].Selectors[0].Label, ",") {
						k, v, _ := strings.Cut(pair, "=")
						wantPods[podLabel(k)] = v
					}
					var port string
					var wantRelabelings []relabeling
					for _, r := range job.RelabelConfigs {
						if r.Action == "keep" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_container_port_name"}) {
							port = r.Regex
						} else {
							wantRelabelings = append(wantRelabelings, r)
						}
					}
					require.NotEmpty(t, port, "the job keeps one port")

					pods := map[string]string{}
					relabelings := ep.Relabelings
					if kind == "ServiceMonitor" {
						service := selectedService(t, objs, m.Selector.MatchLabels)
						for k, v := range service.Spec.Selector {
							pods[podLabel(k)] = v
						}
						for len(relabelings) > 0 && relabelings[0].Action == "keep" {
							require.Len(t, relabelings[0].SourceLabels, 1)
							pods[relabelings[0].SourceLabels[0]] = relabelings[0].Regex
							relabelings = relabelings[1:]
						}
						i := slices.IndexFunc(service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port })
						require.GreaterOrEqual(t, i, 0, "%s has a port %s", service.Name, ep.Port)
						assert.Equal(t, port, service.Spec.Ports[i].TargetPort.String(), "the pods' port")
					} else {
						for k, v := range m.Selector.MatchLabels {
							pods[podLabel(k)] = v
						}
						assert.Equal(t, port, ep.Port, "the pods' port")
					}
					assert.Equal(t, wantPods, pods, "the pods")

					require.NotEmpty(t, relabelings)
					drop := relabelings[len(relabelings)-1]
					require.Equal(t, "labeldrop", drop.Action, "the last rule drops prometheus-operator's labels")
					wantRelabelings = append([]relabeling{{TargetLabel: "job", Replacement: job.JobName}}, wantRelabelings...)
					assert.Equal(t, wantRelabelings, relabelings[:len(relabelings)-1], "the job label, then the job's relabelling")
					dropped := regexp.MustCompile("^(?:" + drop.Regex + ")$")
					var set []string
					for _, r := range wantRelabelings {
						set = append(set, r.TargetLabel)
					}
					for _, label := range append(slices.Clone(operatorTargetLabels), set...) {
						assert.Equal(t, !slices.Contains(set, label), dropped.MatchString(label), "%s: dropped unless the job sets it", label)
					}
				})
			}
		})
	}

	objs := objects(t, helmTemplate(t, append(slices.Clone(chartValues["edge"]), "podMonitor.enabled=true")...))
	var edge []string
	for _, o := range ofKind(objs, "PodMonitor") {
		edge = append(edge, o.GetName())
	}
	assert.Equal(t, []string{"otelcol-gpu-agent"}, edge, "edge nodes run agents only")
}

// selectedService is the one Service of objs whose labels match selector.
func selectedService(tb testing.TB, objs []*unstructured.Unstructured, selector map[string]string) *corev1.Service {
	tb.Helper()
	var selected []*corev1.Service
	for _, o := range ofKind(objs, "Service") {
		labels := o.GetLabels()
		if len(selector) > 0 && !slices.ContainsFunc(slices.Collect(maps.Keys(selector)), func(k string) bool { return labels[k] != selector[k] }) {
			selected = append(selected, convert[corev1.Service](tb, o))
		}
	}
	require.Len(tb, selected, 1, "one Service matches %v", selector)
	return selected[0]
}

func jsonOf(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	return string(b)
}
