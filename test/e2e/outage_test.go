// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/credentials"
)

// backlogAge is how old the oldest sample of the test's backlog is: older than what
// Prometheus' head block takes without an out-of-order window (its newest sample less an
// hour), within the 4 h window deploy/prometheus/otlp.yaml sets.
const backlogAge = 3 * time.Hour

// TestLongOutageBacklog plays the end of an edge outage longer than Prometheus' head block
// (docs/edge.md, "What can still be lost"): another node's current collection has reached
// the store, then the edge node's backlog arrives through the gateway, in the order it was
// collected, one collection a minute from backlogAge ago until now. The clock is not waited
// for: the collections are made with their timestamps shifted, as the agent's queue would
// hold them. Where the docs say the store takes such a backlog (an out-of-order window),
// every collection is there; where they say it does not (Prometheus as deploy/ ships it for
// remote write, with no window), the collections older than the head block are refused, each
// refusal returned to the sender and counted by the store and by the gateway's exporter, and
// the newer part is there.
func TestLongOutageBacklog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		path    storePath
		accepts bool
	}{
		{"prometheus-remote-write-as-shipped", remoteWritePath, false},
		{"prometheus-remote-write-4h-window", remoteWritePathWith(outOfOrderWindow(4 * time.Hour)), true},
		{"prometheus3-otlp", prometheusOTLPPath, true},
		{"thanos-receive-as-default", thanosPath(), false},
		{"thanos-receive-4h-window", thanosPath(receiveOutOfOrderWindow), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secrets, store, gateway := startEdgeStore(t, tc.path)
			now := time.Now().Truncate(time.Minute)
			creds := credentials.NewTLS(&tls.Config{RootCAs: secrets.CA, MinVersion: tls.VersionTLS12})
			send := func(node, ip string, at time.Time, value float64) error {
				return exportOTLP(t, gateway.OTLP, creds, secrets.Token, collectionAt(node, ip, at, value))
			}
			require.NoError(t, send("current", "10.0.0.8", now, 1), "the current node's collection")
			eventually(t, "the current node's collection in the store", func() bool {
				return store.count(t, `node_load1{node_name="current"}`) == 1
			})

			var refused []time.Time
			sent := 0
			for at := now.Add(-backlogAge); !at.After(now); at = at.Add(time.Minute) {
				if err := send("edge", "10.0.0.9", at, float64(sent)); err != nil {
					refused = append(refused, at)
				}
				sent++
			}
			stored := 0
			for _, s := range store.samples(t, fmt.Sprintf(`node_load1{node_name="edge"}[%s]`, backlogAge+time.Hour)) {
				stored += len(s.timestamps)
				assert.Equal(t, "10.0.0.9:9102", s.labels["instance"], "the node's instance")
			}
			t.Logf("%d collections sent, %d refused, %d stored", sent, len(refused), stored)
			if tc.accepts {
				assert.Empty(t, refused, "collections refused")
				assert.Equal(t, sent, stored, "collections stored")
				return
			}
			require.NotEmpty(t, refused, "a backlog older than the head block is refused without a window")
			assert.Equal(t, sent, stored+len(refused), "every collection is either stored or refused to its sender")
			assert.Positive(t, stored, "the newer part of the backlog is stored")
			// The refused ones are the oldest: older than the head block's lower bound.
			assert.True(t, refused[len(refused)-1].Before(now.Add(-time.Hour+time.Minute)), "the newest refused collection, %s, is within the head block", refused[len(refused)-1])
			assert.Equal(t, now.Add(-backlogAge), refused[0], "the oldest collection")
			// Counted: by the store, and by the gateway's exporter (the agent's own
			// otelcol_exporter_send_failed_metric_points counts it too).
			assert.GreaterOrEqual(t, store.counter(t, "prometheus_tsdb_out_of_bound_samples_total", nil), float64(len(refused)), "the store's count of refused samples")
			assert.GreaterOrEqual(t, counterAt(t, gateway.Telemetry, "otelcol_exporter_send_failed_metric_points", map[string]string{"exporter": "prometheusremotewrite/store"}), float64(len(refused)),
				"the gateway's count of refused points")
		})
	}
}

// outOfOrderWindow is the prometheus.yml that gives the TSDB an out-of-order window.
func outOfOrderWindow(d time.Duration) string {
	return fmt.Sprintf("storage: {tsdb: {out_of_order_time_window: %s}}\n", d)
}

// collectionAt is one collection of a node as its agent sends it (the resource's node_name and
// service.instance.id) stamped at: node_load1 at value.
func collectionAt(node, ip string, at time.Time, value float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("node_name", node)
	rm.Resource().Attributes().PutStr("service.instance.id", ip+":9102")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("node_load1")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(value)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	return md
}

// counterAt sums the samples of counter name whose labels include match on a Prometheus text
// page (a collector's telemetry, a store's own /metrics); 0 where there are none.
func counterAt(tb testing.TB, page, name string, match map[string]string) float64 {
	tb.Helper()
	families, _, err := scrape(page)
	require.NoError(tb, err)
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range match {
			matches = matches && labels[k] == v
		}
		if matches {
			sum += valueOf(m)
		}
	}
	return sum
}
