// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// draSlice is a node's ResourceSlice of NVIDIA's DRA driver with the given GPUs (UUID by minor),
// as draplugin (test/realnode) and NVIDIA's driver publish it.
func draSlice(node string, gpus map[int64]string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for minor, uuid := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name:       "gpu-" + string(rune('0'+minor)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: new(uuid)}, "minor": {IntValue: new(minor)}},
		})
	}
	return s
}

// deviceWriter is a writer with the quarantine acting (uncordon after 10m) on client-go's fake
// API server, whose discovery serves DeviceTaintRules at version (none: "").
func deviceWriter(t *testing.T, version string, nodes []*corev1.Node, objs ...runtime.Object) (*writer, *fake.Clientset) {
	t.Helper()
	for _, n := range nodes {
		objs = append(objs, n)
	}
	kube := fake.NewClientset(objs...)
	disc := kube.Discovery().(*fakediscovery.FakeDiscovery)
	v1 := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}}}
	disc.Resources = []*metav1.APIResourceList{v1}
	rules := metav1.APIResource{Name: "devicetaintrules", Kind: "DeviceTaintRule"}
	switch version {
	case "":
	case "v1":
		v1.APIResources = append(v1.APIResources, rules)
	default:
		disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: "resource.k8s.io/" + version, APIResources: []metav1.APIResource{rules}})
	}
	cfg := createDefaultConfig().(*Config)
	quarantineOnFake(cfg)
	w := newWriter(cfg, connectortest.NewNopSettings(metadata.Type))
	w.kube, w.logger, w.identity = kube, zap.NewNop(), "test"
	w.recorder = newRecorder(nil, "test", time.Minute)
	w.nodes = cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Node{}, 0, cache.Indexers{})
	for _, n := range nodes {
		require.NoError(t, w.nodes.GetStore().Add(n))
	}
	w.nodeCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), w.nodes.GetStore(), cache.MutationCacheOptions{TTL: time.Minute})
	return w, kube
}

func quarantineOnFake(cfg *Config) {
	cfg.Quarantine.Enabled = true
	cfg.Quarantine.DryRun = false
	cfg.Quarantine.UncordonAfter = 10 * time.Minute
	cfg.Quarantine.Breaker.MaxShare = 1
}

func gpuNode(capacity bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}}
	if capacity {
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	}
	return n
}

// faultyVerdict is a row remap pending (reset_gpu) on GPU minor of node.
func faultyVerdict() verdict {
	return verdict{reason: "RowRemapPending", class: ActionResetGPU, action: ActionResetGPU, severity: xid.SeverityWarning, faults: "GPU 1 (GPU-a1): a memory row remapping waits for a GPU reset", latest: t0}
}

// quarantinePass is one pass of the writer's quarantine over node n1.
func (w *writer) quarantinePass(t *testing.T, kube *fake.Clientset, v verdict, gpus []faultyGPU, healthySince, now time.Time) *corev1.Node {
	t.Helper()
	node, err := kube.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	w.quarantineNode(t.Context(), node, v, gpus, healthySince, now)
	w.endQuarantinePass(t.Context(), now)
	node, err = kube.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	return node
}

func TestDeviceTaintRuleForDRAGPU(t *testing.T) {
	// 1.34 serves the rules at v1alpha3 alone (with its gate); a later server at v1.
	for _, version := range []string{"v1alpha3", "v1beta2", "v1"} {
		t.Run(version, func(t *testing.T) {
			w, kube := deviceWriter(t, version, []*corev1.Node{gpuNode(false)}, draSlice("n1", map[int64]string{0: "GPU-a0", 1: "GPU-a1"}))
			faulty := []faultyGPU{{gpu: "GPU-a1", minor: "1"}}
			node := w.quarantinePass(t, kube, faultyVerdict(), faulty, time.Time{}, t0)
			assert.False(t, node.Spec.Unschedulable, "the node stays in service")
			assert.Empty(t, node.Spec.Taints)
			assert.Empty(t, node.Annotations)

			require.NotNil(t, w.devices.api, "the rules' API discovered")
			assert.Equal(t, version, w.devices.version)
			rules, err := w.devices.api.list(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, rules, 1, "one rule: the faulty GPU's device alone")
			r := rules[0]
			assert.Equal(t, resourcev1.DeviceTaintSelector{Driver: new("gpu.nvidia.com"), Pool: new("n1"), Device: new("gpu-1")}, *r.Spec.DeviceSelector)
			assert.Equal(t, resourcev1.DeviceTaint{Key: TaintKey, Value: "reset_gpu", Effect: resourcev1.DeviceTaintEffectNoSchedule}, r.Spec.Taint)
			assert.Equal(t, ManagedBy, r.Labels[LabelManagedBy])
			var rec deviceRecord
			require.NoError(t, json.Unmarshal([]byte(r.Annotations[AnnotationQuarantine]), &rec))
			assert.Equal(t, "n1", rec.Node)
			assert.Equal(t, "GPU-a1", rec.GPU)
			assert.Equal(t, "gpu.nvidia.com/n1/gpu-1", rec.Device)
			assert.Equal(t, ActionResetGPU, rec.Action)
			assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeApplied}])
			assert.Equal(t, map[string]int64{"action=reset_gpu,device=gpu.nvidia.com/n1/gpu-1,dry_run=false,gpu=GPU-a1,node_name=n1": 1}, deviceQuarantined(w),
				"the GPU held, not the node")
			// Made at the version discovered, and no other.
			for _, a := range kube.Actions() {
				if a.GetVerb() == "create" {
					assert.Equal(t, version, a.GetResource().Version)
				}
			}

			// The next pass (a writer that restarts reads the same) does nothing twice.
			w.quarantinePass(t, kube, faultyVerdict(), faulty, time.Time{}, t0.Add(time.Minute))
			rules, err = w.devices.api.list(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Len(t, rules, 1)
			assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeApplied}])

			// Healthy, but not yet for uncordon_after: the rule stays; then it goes.
			healthy := verdict{healthy: true, reason: reasonHealthy}
			w.quarantinePass(t, kube, healthy, nil, t0.Add(2*time.Minute), t0.Add(5*time.Minute))
			rules, _ = w.devices.api.list(t.Context(), metav1.ListOptions{})
			assert.Len(t, rules, 1, "healthy for 3m of 10m")
			node = w.quarantinePass(t, kube, healthy, nil, t0.Add(2*time.Minute), t0.Add(12*time.Minute))
			rules, _ = w.devices.api.list(t.Context(), metav1.ListOptions{})
			assert.Empty(t, rules, "returned to service")
			assert.False(t, node.Spec.Unschedulable)
			assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionUntaintDevice, metadata.AttributeOutcomeApplied}])
			assert.Empty(t, deviceQuarantined(w))
		})
	}
}

// deviceQuarantined is gpu_device_quarantined as the writer records it now.
func deviceQuarantined(w *writer) map[string]int64 {
	w.recordQuarantine(pcommon.NewTimestampFromTime(t0))
	return points(w.mb.Emit(), "gpu_device_quarantined")
}

func TestDevicePluginGPUTakesTheNode(t *testing.T) {
	// The node's GPUs are the device plugin's: no slice has them.
	w, kube := deviceWriter(t, "v1alpha3", []*corev1.Node{gpuNode(true)}, draSlice("n2", map[int64]string{1: "GPU-a1"}))
	node := w.quarantinePass(t, kube, faultyVerdict(), []faultyGPU{{gpu: "GPU-a1", minor: "1"}}, time.Time{}, t0)
	assert.True(t, node.Spec.Unschedulable, "the node path: cordoned")
	assert.NotEmpty(t, node.Annotations[AnnotationQuarantine])
	rules, err := kube.ResourceV1alpha3().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, rules.Items, "no rule")
}

func TestDRAGPUTakesTheNodeWhere(t *testing.T) {
	dra := draSlice("n1", map[int64]string{0: "GPU-a0", 1: "GPU-a1"})
	for _, c := range []struct {
		name    string
		version string
		gpus    []faultyGPU
	}{
		{"the server serves no DeviceTaintRules", "", []faultyGPU{{gpu: "GPU-a1", minor: "1"}}},
		{"a fault of the node itself", "v1", []faultyGPU{{gpu: "GPU-a1", minor: "1"}, {}}},
		{"one faulty GPU is no device", "v1", []faultyGPU{{gpu: "GPU-a1", minor: "1"}, {gpu: "GPU-x", minor: "7"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// With capacity: without the rules' API the breaker counts GPU nodes by it alone.
			w, kube := deviceWriter(t, c.version, []*corev1.Node{gpuNode(true)}, dra)
			node := w.quarantinePass(t, kube, faultyVerdict(), c.gpus, time.Time{}, t0)
			assert.True(t, node.Spec.Unschedulable, "the node path: cordoned")
			rules, err := kube.ResourceV1().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, rules.Items)
		})
	}
}

func TestDeviceTaintByMinorEffectAndDryRun(t *testing.T) {
	w, kube := deviceWriter(t, "v1", []*corev1.Node{gpuNode(false)}, draSlice("n1", map[int64]string{0: "GPU-a0", 1: "GPU-a1"}))
	w.cfg.Quarantine.DeviceTaint.Effect = resourcev1.DeviceTaintEffectNoExecute
	// A GPU lost before its UUID was read is found by its minor number.
	w.quarantinePass(t, kube, faultyVerdict(), []faultyGPU{{gpu: "#0", minor: "0"}}, time.Time{}, t0)
	rules, err := kube.ResourceV1().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rules.Items, 1)
	assert.Equal(t, "gpu-0", *rules.Items[0].Spec.DeviceSelector.Device)
	assert.Equal(t, resourcev1.DeviceTaintEffectNoExecute, rules.Items[0].Spec.Taint.Effect)

	// A dry run records and writes nothing.
	w, kube = deviceWriter(t, "v1", []*corev1.Node{gpuNode(false)}, draSlice("n1", map[int64]string{1: "GPU-a1"}))
	w.cfg.Quarantine.DryRun, w.devices.dryRun = true, true
	node := w.quarantinePass(t, kube, faultyVerdict(), []faultyGPU{{gpu: "GPU-a1", minor: "1"}}, time.Time{}, t0)
	assert.False(t, node.Spec.Unschedulable)
	rules, err = kube.ResourceV1().DeviceTaintRules().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, rules.Items)
	assert.Len(t, w.devices.held["n1"], 1)
	assert.Equal(t, map[string]int64{"action=reset_gpu,device=gpu.nvidia.com/n1/gpu-1,dry_run=true,gpu=GPU-a1,node_name=n1": 1}, deviceQuarantined(w))
	assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeDryRun}])
	w.quarantinePass(t, kube, faultyVerdict(), []faultyGPU{{gpu: "GPU-a1", minor: "1"}}, time.Time{}, t0.Add(time.Minute))
	assert.Equal(t, int64(1), w.quarantine.counts[quarantineCount{metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeDryRun}], "recorded once")
}

func TestRuleName(t *testing.T) {
	d := deviceRef{Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-1"}
	name := ruleName("n1", d)
	assert.Regexp(t, `^gpu-unhealthy-n1-gpu-1-[0-9a-f]{16}$`, name)
	assert.NotEqual(t, name, ruleName("n1", deviceRef{Driver: "gpu.example.com", Pool: "n1", Device: "gpu-1"}), "another driver's device")
	long := ruleName("node."+strings.Repeat("a", 300), d)
	assert.LessOrEqual(t, len(long), 253)
}
