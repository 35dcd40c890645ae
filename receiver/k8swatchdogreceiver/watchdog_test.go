// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// harness runs a watchdog on the fake clientset, with /healthz answered by an httptest server.
type harness struct {
	w    *watchdog
	kube *fake.Clientset
	logs *consumertest.LogsSink

	mu          sync.Mutex
	healthzCode int
	healthzBody string
}

func newHarness(t *testing.T, cfg *Config, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessOn(t, cfg, fake.NewClientset(objs...))
}

func newHarnessOn(tb testing.TB, cfg *Config, kube *fake.Clientset) *harness {
	tb.Helper()
	h := &harness{kube: kube, logs: new(consumertest.LogsSink), healthzCode: http.StatusOK, healthzBody: "ok"}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(rw, r)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		rw.WriteHeader(h.healthzCode)
		_, _ = rw.Write([]byte(h.healthzBody))
	}))
	tb.Cleanup(srv.Close)

	h.w = newWatchdog(cfg, receivertest.NewNopSettings(metadata.Type))
	h.w.logs = h.logs
	h.w.newClients = func(*Config) (clients, error) {
		rc := &rest.Config{Host: srv.URL}
		probe, err := probeClient(rc)
		return clients{kube: h.kube, rest: probe, host: apiServerHost(rc)}, err
	}
	require.NoError(tb, h.w.start(tb.Context(), componenttest.NewNopHost()))
	tb.Cleanup(func() { require.NoError(tb, h.w.shutdown(context.WithoutCancel(tb.Context()))) })
	require.True(tb, h.w.synced.Load(), "the fake clientset's caches must sync within sync_timeout")
	return h
}

func (h *harness) setHealthz(code int, body string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthzCode, h.healthzBody = code, body
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.AuthType = kubeclient.AuthTypeKubeConfig
	return cfg
}

var histogramNames = []string{healthzLatencyName, listPodsLatencyName, listNodesLatencyName}

// compareGolden compares with testdata/expected/<name>.yaml; the histograms' values are
// durations, so only their shape is compared here (see histogramCounts).
func compareGolden(t *testing.T, name string, actual pmetric.Metrics) {
	t.Helper()
	goldentest.Metrics(t, filepath.Join("testdata", "expected", name+".yaml"), actual,
		pmetrictest.IgnoreStartTimestamp(), pmetrictest.IgnoreTimestamp(),
		pmetrictest.IgnoreMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder(),
		pmetrictest.IgnoreMetricValues(histogramNames...))
}

// histogramCounts returns each latency histogram's observation count, checking its buckets.
func histogramCounts(t *testing.T, md pmetric.Metrics) map[string]uint64 {
	t.Helper()
	counts := map[string]uint64{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		if m.Type() != pmetric.MetricTypeHistogram {
			continue
		}
		dp := m.Histogram().DataPoints().At(0)
		require.Equal(t, latency.Bounds, dp.ExplicitBounds().AsRaw(), m.Name())
		require.GreaterOrEqual(t, dp.ExplicitBounds().At(dp.ExplicitBounds().Len()-1), 60.0, "%s must reach 60 s", m.Name())
		var sum uint64
		for _, c := range dp.BucketCounts().AsRaw() {
			sum += c
		}
		require.Equal(t, dp.Count(), sum, m.Name())
		counts[m.Name()] = dp.Count()
	}
	return counts
}

func TestScrapeFixtureCluster(t *testing.T) {
	h := newHarness(t, testConfig(), fixtureCluster()...)
	md, err := h.w.scrape(t.Context())
	require.NoError(t, err)
	compareGolden(t, "cluster", md)
	assert.Equal(t, map[string]uint64{healthzLatencyName: 1, listPodsLatencyName: 1, listNodesLatencyName: 1}, histogramCounts(t, md))
}

// TestScrapeConfigured runs the fixture with another service label, job-name sources, a MIG
// resource added to the GPU names and a cluster name.
func TestScrapeConfigured(t *testing.T) {
	cfg := testConfig()
	cfg.ClusterName = "gpu-east"
	cfg.ServiceLabel = "jobName"
	cfg.JobNameSources = []JobNameSource{{Annotation: "example.com/job"}}
	cfg.GPUResourceNames = []string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}
	objs := fixtureCluster()
	n := objs[2].(*corev1.Node)
	n.Status.Capacity["nvidia.com/mig-1g.10gb"] = *resource.NewQuantity(7, resource.DecimalSI)
	p := objs[len(objs)-1].(*corev1.Pod)
	p.Annotations = map[string]string{"example.com/job": "from-annotation"}
	h := newHarness(t, cfg, objs...)
	md, err := h.w.scrape(t.Context())
	require.NoError(t, err)
	compareGolden(t, "configured", md)
}

func TestScrapeHealthzFailure(t *testing.T) {
	h := newHarness(t, testConfig(), fixtureCluster()[:1]...)
	h.setHealthz(http.StatusInternalServerError, "[+]ping ok\n[-]etcd failed: reason withheld\nhealthz check failed")
	md, err := h.w.scrape(t.Context())
	require.NoError(t, err, "an unhealthy API server is reported, not a scrape error")
	compareGolden(t, "healthz-failure", md)
	assert.Equal(t, uint64(1), histogramCounts(t, md)[healthzLatencyName])
}

// TestScrapeEverythingDisabled keeps the histograms, which the metrics config cannot switch off,
// in a well-formed resource and scope.
func TestScrapeEverythingDisabled(t *testing.T) {
	cfg := testConfig()
	cfg.MetricsBuilderConfig = metadata.MetricsBuilderConfig{}
	h := newHarness(t, cfg)
	md, err := h.w.scrape(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	assert.Equal(t, metadata.ScopeName, sm.Scope().Name())
	assert.Equal(t, 3, sm.Metrics().Len())
}

// TestFailedListIsCounted makes the first LIST of pods fail, as it does while the API server
// is unreachable or the receiver lacks permission: the informer retries, and the failure is
// counted (OpenPAI's "parse") and timed.
func TestFailedListIsCounted(t *testing.T) {
	kube := fake.NewClientset(fixtureCluster()...)
	failed := false
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failed {
			return false, nil, nil
		}
		failed = true
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no RBAC rule"))
	})
	h := newHarnessOn(t, testConfig(), kube)
	md, err := h.w.scrape(t.Context())
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{healthzLatencyName: 1, listPodsLatencyName: 2, listNodesLatencyName: 1}, histogramCounts(t, md))
	assert.Equal(t, map[string]int64{
		"parse": 1, "healthz": 0, "unknown_pod_cond": 1, "unknown_node_cond": 1, "unexpected_container_state": 1,
	}, errorCounts(md))
}

// errorCounts reads process_error_log_total by type.
func errorCounts(md pmetric.Metrics) map[string]int64 {
	out := map[string]int64{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Name() != "process_error_log_total" {
			continue
		}
		dps := ms.At(i).Sum().DataPoints()
		for j := 0; j < dps.Len(); j++ {
			typ, _ := dps.At(j).Attributes().Get("type")
			out[typ.Str()] = dps.At(j).IntValue()
		}
	}
	return out
}

func TestNewClients(t *testing.T) {
	cfg := testConfig()
	cfg.KubeConfigPath = filepath.Join("testdata", "kubeconfig")
	c, err := newClients(cfg)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", c.host)

	cfg.Context = "missing"
	_, err = newClients(cfg)
	assert.ErrorContains(t, err, `kubeconfig_path "testdata/kubeconfig", context "missing": context "missing" does not exist`)

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = newClients(createDefaultConfig().(*Config))
	assert.ErrorContains(t, err, "auth_type serviceAccount needs to run in a pod with a service account (set auth_type: kubeConfig outside the cluster)")
}

func compareLogsGolden(t *testing.T, name string, actual plog.Logs) {
	t.Helper()
	goldentest.Logs(t, filepath.Join("testdata", "expected", name+".yaml"), actual, plogtest.IgnoreTimestamp(), plogtest.IgnoreObservedTimestamp())
}

// merged puts every record the sink received, in order, under one resource and scope.
func merged(sink *consumertest.LogsSink) plog.Logs {
	out := plog.NewLogs()
	var records plog.LogRecordSlice
	for _, l := range sink.AllLogs() {
		if out.ResourceLogs().Len() == 0 {
			l.CopyTo(out)
			records = out.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			continue
		}
		l.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().MoveAndAppendTo(records)
	}
	return out
}
