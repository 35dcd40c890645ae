// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// endedSeries lists the series md ends (NoRecordedValue points, in any resource), as
// metric{attr=value,...}, and checks that no other point of md has the same series.
func endedSeries(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	var ended []string
	live := map[string]bool{}
	for r := 0; r < md.ResourceMetrics().Len(); r++ {
		sms := md.ResourceMetrics().At(r).ScopeMetrics()
		for s := 0; s < sms.Len(); s++ {
			ms := sms.At(s).Metrics()
			for i := 0; i < ms.Len(); i++ {
				m := ms.At(i)
				if m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				for j := 0; j < m.Gauge().DataPoints().Len(); j++ {
					dp := m.Gauge().DataPoints().At(j)
					key := readableSeries(m.Name(), dp.Attributes())
					if dp.Flags().NoRecordedValue() {
						ended = append(ended, key)
					} else {
						live[key] = true
					}
				}
			}
		}
	}
	for _, key := range ended {
		assert.False(t, live[key], "%s is both ended and live", key)
	}
	return ended
}

func readableSeries(name string, attrs pcommon.Map) string {
	var kv []string
	for k, v := range attrs.All() {
		kv = append(kv, k+"="+v.Str())
	}
	slices.Sort(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

// TestGoneSeriesAreEnded checks that the receiver ends, through internal/staleness, the series a
// change or a deletion replaced.
func TestGoneSeriesAreEnded(t *testing.T) {
	h := newHarness(t, testConfig(), fixtureCluster()...)
	ctx := t.Context()
	md, err := h.w.scrape(ctx)
	require.NoError(t, err)
	require.Empty(t, endedSeries(t, md), "the first collection ends nothing")

	// The only service pod goes (pai_pod_count and pai_container_count lose every series), a
	// finished pod goes, and a pending pod starts running (its series changes).
	pods := h.kube.CoreV1()
	require.NoError(t, pods.Pods("pai").Delete(ctx, "rest-server-0", metav1.DeleteOptions{}))
	require.NoError(t, pods.Pods("default").Delete(ctx, "old-0", metav1.DeleteOptions{}))
	updatePod("vc", "queued-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })(t, h)
	poll.Until(t, 10*time.Second, "the informer to see rest-server-0 deleted and queued-0 running", func() bool {
		_, exists, _ := h.w.pods.GetStore().GetByKey("pai/rest-server-0")
		obj, _, _ := h.w.pods.GetStore().GetByKey("vc/queued-0")
		return !exists && obj.(*corev1.Pod).Status.Phase == corev1.PodRunning
	})
	poll.Until(t, 10*time.Second, "the informer to see old-0 deleted", func() bool {
		_, exists, _ := h.w.pods.GetStore().GetByKey("default/old-0")
		return !exists
	})

	md, err = h.w.scrape(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"pai_pod_count{host_ip=10.0.0.1,initialized=true,name=rest-server-0,namespace=pai,node_name=node-a,phase=running,pod_scheduled=true,ready=false,service_name=rest-server}",
		"pai_container_count{host_ip=10.0.0.1,name=server,namespace=pai,node_name=node-a,pod_name=rest-server-0,ready=true,service_name=rest-server,state=running}",
		"pai_container_count{host_ip=10.0.0.1,name=proxy,namespace=pai,node_name=node-a,pod_name=rest-server-0,ready=false,service_name=rest-server,state=waiting}",
		"pai_container_count{host_ip=10.0.0.1,name=logger,namespace=pai,node_name=node-a,pod_name=rest-server-0,ready=false,service_name=rest-server,state=unknown}",
		"pai_job_pod_count{host_ip=10.0.0.1,initialized=true,job_name=old-job,name=old-0,node_name=node-a,phase=succeeded,pod_bound=true,pod_scheduled=true,ready=false}",
		"pai_job_pod_count{host_ip=unscheduled,initialized=unknown,job_name=queued,name=queued-0,node_name=,phase=pending,pod_bound=false,pod_scheduled=false,ready=unknown}",
	}, endedSeries(t, md))

	md, err = h.w.scrape(ctx)
	require.NoError(t, err)
	assert.Empty(t, endedSeries(t, md), "a series is ended once")
}
