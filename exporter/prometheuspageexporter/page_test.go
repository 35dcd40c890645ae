// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
)

var t0 = time.Unix(1_750_000_000, 0)

// agentConfig is the shipped agent's prometheus settings.
func agentConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.TranslationStrategy = "UnderscoreEscapingWithoutSuffixes"
	cfg.WithoutScopeInfo = true
	cfg.ResourceConstantLabels = settings([]string{"*"}, []string{"k8s.pod.uid"})
	cfg.MetricExpiration = 2 * time.Minute
	return cfg
}

func testPage(t *testing.T, logger *zap.Logger) *page {
	t.Helper()
	p, err := newPage(agentConfig(), logger)
	require.NoError(t, err)
	return p
}

// gaugeBatch is one gauge point per GPU, each GPU a resource, at ts.
func gaugeBatch(ts time.Time, value float64, gpus ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, gpu := range gpus {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("uuid", gpu)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("gpu.temperature")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetDoubleValue(value)
	}
	return md
}

func text(p *page, now time.Time) string {
	var b bytes.Buffer
	_ = p.viewAt(now).writeText(&b)
	return b.String()
}

// pieceText is a piece's text, inflated as a scrape without gzip inflates it.
func pieceText(t *testing.T, pc *piece) string {
	var b bytes.Buffer
	require.NoError(t, (&view{pieces: []*piece{pc}, size: pc.size}).writeText(&b))
	return b.String()
}

func TestOlderPointNeverOverwritesNewer(t *testing.T) {
	p := testPage(t, zap.NewNop())
	p.consume(gaugeBatch(t0.Add(time.Minute), 70, "GPU-a"), t0)
	// An agent replaying its queue after an outage: the point of a minute before arrives later.
	p.consume(gaugeBatch(t0, 40, "GPU-a"), t0.Add(time.Second))
	assert.Contains(t, text(p, t0.Add(time.Second)), `gpu_temperature{uuid="GPU-a"} 70`)
	p.consume(gaugeBatch(t0.Add(2*time.Minute), 75, "GPU-a"), t0.Add(2*time.Second))
	assert.Contains(t, text(p, t0.Add(2*time.Second)), `gpu_temperature{uuid="GPU-a"} 75`)
}

func TestSeriesEndedByReceiverLeavesAtOnce(t *testing.T) {
	p := testPage(t, zap.NewNop())
	p.consume(gaugeBatch(t0, 70, "GPU-a", "GPU-b"), t0)
	ended := gaugeBatch(t0.Add(time.Second), 0, "GPU-a")
	ended.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	p.consume(ended, t0.Add(time.Second))
	page := text(p, t0.Add(time.Second))
	assert.NotContains(t, page, "GPU-a")
	assert.Contains(t, page, `gpu_temperature{uuid="GPU-b"} 70`)
}

// Expiry counts from a series' last arrival, not its timestamp, and needs no scrape: the
// ticker's sweep frees the series.
func TestExpiryByArrivalWithoutScrapes(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := agentConfig()
	e, err := newPageExporter(cfg, exportertest.NewNopSettings(metadata.Type), clk)
	require.NoError(t, err)
	require.NoError(t, e.start(t.Context(), componenttest.NewNopHost()))
	shutdownCtx := context.WithoutCancel(t.Context())
	t.Cleanup(func() { require.NoError(t, e.shutdown(shutdownCtx)) })

	// Points stamped an hour ago arrive now: they are not expired.
	require.NoError(t, e.consumeMetrics(t.Context(), gaugeBatch(t0.Add(-time.Hour), 70, "GPU-a", "GPU-b")))
	clk.Advance(time.Minute)
	require.NoError(t, e.consumeMetrics(t.Context(), gaugeBatch(t0, 71, "GPU-b")))
	require.Len(t, e.page.series, 2)

	clk.Advance(time.Minute + sweepInterval) // GPU-a's last arrival is 2m5s ago, GPU-b's 1m5s
	require.Eventually(t, func() bool {
		e.page.mu.Lock()
		defer e.page.mu.Unlock()
		return len(e.page.series) == 1
	}, 10*time.Second, time.Millisecond, "the ticker's sweep never dropped GPU-a")
	page := text(e.page, clk.Now())
	assert.NotContains(t, page, "GPU-a")
	assert.Contains(t, page, `gpu_temperature{uuid="GPU-b"} 71`)
}

// A batch from one agent renders that agent's pieces and leaves the others' as they were.
func TestBatchRendersOnlyItsAgent(t *testing.T) {
	p := testPage(t, zap.NewNop())
	fromAgent := func(md pmetric.Metrics, instance string) pmetric.Metrics {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			md.ResourceMetrics().At(i).Resource().Attributes().PutStr("service.instance.id", instance)
		}
		return md
	}
	p.consume(fromAgent(gaugeBatch(t0, 70, "GPU-a", "GPU-b"), "10.0.0.1:9102"), t0)
	p.consume(fromAgent(gaugeBatch(t0, 70, "GPU-c"), "10.0.0.2:9102"), t0)
	fam := p.families["gpu_temperature"]
	require.Len(t, fam.pieces, 2, "one piece per agent")
	before := maps.Clone(fam.pieces)
	p.consume(fromAgent(gaugeBatch(t0.Add(time.Second), 71, "GPU-c"), "10.0.0.2:9102"), t0.Add(time.Second))
	changed := 0
	for k, pc := range fam.pieces {
		if before[k] != pc {
			changed++
			assert.Contains(t, pieceText(t, pc), `gpu_temperature{instance="10.0.0.2:9102",service_instance_id="10.0.0.2:9102",uuid="GPU-c"} 71`)
		}
	}
	assert.Equal(t, 1, changed)
}

// Two resources' series of one family sit together under one header.
func TestFamiliesKeptTogether(t *testing.T) {
	p := testPage(t, zap.NewNop())
	md := gaugeBatch(t0, 70, "GPU-a", "GPU-b")
	for i := range 2 {
		m := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics().AppendEmpty()
		m.SetName("gpu.power")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(t0))
		dp.SetDoubleValue(300)
	}
	p.consume(md, t0)
	lines := strings.Split(strings.TrimSpace(text(p, t0)), "\n")
	var names []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			names = append(names, l[:strings.IndexByte(l, '{')])
		}
	}
	assert.Equal(t, []string{"gpu_power", "gpu_power", "gpu_temperature", "gpu_temperature"}, names)
	assert.Equal(t, 2, strings.Count(text(p, t0), "# TYPE"))
}

// A delta counter adds up and keeps the start time of its first point.
func TestDeltaCounterAccumulates(t *testing.T) {
	p := testPage(t, zap.NewNop())
	batch := func(start, end time.Time, v int64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("xid.errors")
		m.SetEmptySum().SetIsMonotonic(true)
		m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp := m.Sum().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(end))
		dp.SetIntValue(v)
		return md
	}
	p.consume(batch(t0, t0.Add(10*time.Second), 2), t0)
	p.consume(batch(t0.Add(10*time.Second), t0.Add(20*time.Second), 3), t0)
	assert.Contains(t, text(p, t0), "xid_errors 5\n")
	s := p.series[firstKey(p)]
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), s.start, "the counter keeps its start time")
}

func firstKey(p *page) uint64 {
	for k := range p.series {
		return k
	}
	return 0
}

// A metric whose name has another type already is refused with one warning, not one per batch.
func TestTypeConflictRefusedAndSaidOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := testPage(t, zap.New(core))
	md := gaugeBatch(t0, 70, "GPU-a")
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	m.SetName("gpu.temperature")
	m.SetEmptySum().SetIsMonotonic(true)
	m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	m.Sum().DataPoints().AppendEmpty().SetDoubleValue(1)
	p.consume(md, t0)
	p.consume(md, t0)
	assert.Equal(t, 1, logs.FilterMessageSnippet("another type").Len())
	assert.Contains(t, text(p, t0), "# TYPE gpu_temperature gauge\n")
	assert.Equal(t, 1, strings.Count(text(p, t0), "gpu_temperature{"))
}

// Labels that cannot be Prometheus labels drop the series with a warning naming the label;
// the batch's other series stay.
func TestBadLabelsDropOnlyTheirSeries(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := testPage(t, zap.New(core))
	md := gaugeBatch(t0, 70, "GPU-a", "GPU-b")
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes().PutStr("u.uid", "x")
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes().PutStr("u_uid", "y")
	p.consume(md, t0)
	page := text(p, t0)
	assert.NotContains(t, page, "GPU-a")
	assert.Contains(t, page, "GPU-b")
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].ContextMap()["error"], `two attributes become the label "u_uid"`)
}

// badLabelsBatch is one series per GPU whose two attributes become one label: never a series.
func badLabelsBatch(ts time.Time, gpus ...string) pmetric.Metrics {
	md := gaugeBatch(ts, 70, gpus...)
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes()
		attrs.PutStr("u.uid", "x")
		attrs.PutStr("u_uid", "y")
	}
	return md
}

// A refused series is said once while it keeps coming, and forgotten once it stops: a stream of
// distinct bad series holds memory for about two expirations, not for the exporter's life.
func TestRefusedSeriesSaidOnceAndForgotten(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := testPage(t, zap.New(core)) // expiration 2m
	now := t0
	for range 10 { // one bad series every 30 s for 5 min: kept known, said once
		p.consume(badLabelsBatch(now, "GPU-kept"), now)
		now = now.Add(30 * time.Second)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("series dropped").Len())

	for i := range 100 { // a new bad series every 30 s for 50 min
		p.consume(badLabelsBatch(now, "GPU-"+itoa(i)), now)
		now = now.Add(30 * time.Second)
		require.LessOrEqual(t, len(p.refused.current)+len(p.refused.before), 2*4+1, "refused keys kept past two expirations")
	}
	assert.Equal(t, 101, logs.FilterMessageSnippet("series dropped").Len())

	p.consume(badLabelsBatch(now, "GPU-kept"), now) // back after 50 min: forgotten, so said again
	assert.Equal(t, 102, logs.FilterMessageSnippet("series dropped").Len())
}

// The gzip body is one gzip member that any reader inflates to the text page, and the
// exporter serves each as it is asked for.
func TestScrapeTextAndGzip(t *testing.T) {
	port, err := loopback.FreePort()
	require.NoError(t, err)
	cfg := agentConfig()
	cfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:" + itoa(port)
	e, err := newPageExporter(cfg, exportertest.NewNopSettings(metadata.Type), clock.NewFake(t0))
	require.NoError(t, err)
	require.NoError(t, e.start(t.Context(), componenttest.NewNopHost()))
	shutdownCtx := context.WithoutCancel(t.Context())
	t.Cleanup(func() { require.NoError(t, e.shutdown(shutdownCtx)) })
	require.NoError(t, e.consumeMetrics(t.Context(), gaugeBatch(t0, 70, "GPU-a", "GPU-b", "GPU-c")))

	get := func(encoding string) (*http.Response, []byte) {
		req, reqErr := http.NewRequest(http.MethodGet, "http://"+cfg.ServerConfig.NetAddr.Endpoint+"/metrics", http.NoBody)
		require.NoError(t, reqErr)
		req.Header.Set("Accept-Encoding", encoding)
		resp, rtErr := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, rtErr)
		defer resp.Body.Close()
		body, readErr := io.ReadAll(resp.Body)
		require.NoError(t, readErr)
		return resp, body
	}
	resp, plain := get("identity")
	assert.Empty(t, resp.Header.Get("Content-Encoding"))
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", resp.Header.Get("Content-Type"))
	assert.Contains(t, string(plain), `gpu_temperature{uuid="GPU-c"} 70`)

	resp, compressed := get("gzip, deflate;q=0.5")
	assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	require.NoError(t, err)
	zr.Multistream(false) // one member: the CRC and size in its trailer cover the whole page
	inflated, err := io.ReadAll(zr)
	require.NoError(t, err, "the trailer's CRC-32 and size match the page")
	assert.Equal(t, string(plain), string(inflated))

	resp, _ = get("gzip;q=0")
	assert.Empty(t, resp.Header.Get("Content-Encoding"), "q=0 refuses gzip")
}

func itoa(i int) string { return strconv.Itoa(i) }

// A GPU's metrics share one set of labels (held once, not per series), and a set leaves with
// its last series.
func TestSeriesShareLabelSetsUntilTheLastLeaves(t *testing.T) {
	p := testPage(t, zap.NewNop())
	md := gaugeBatch(t0, 70, "GPU-a", "GPU-b")
	for i := range md.ResourceMetrics().Len() {
		power := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics().AppendEmpty()
		power.SetName("gpu.power")
		dp := power.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(t0))
		dp.SetDoubleValue(300)
	}
	p.consume(md, t0)
	require.Len(t, p.series, 4)
	require.Len(t, p.labelSets, 2, "one label set per GPU, whatever its metrics")

	ended := gaugeBatch(t0.Add(time.Second), 0, "GPU-a")
	ended.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	p.consume(ended, t0.Add(time.Second))
	assert.Len(t, p.labelSets, 2, "GPU-a's power still uses its labels")
	page := text(p, t0.Add(time.Second))
	assert.Contains(t, page, `gpu_power{uuid="GPU-a"} 300`)
	assert.NotContains(t, page, `gpu_temperature{uuid="GPU-a"}`)

	p.expire(t0.Add(3 * time.Minute))
	assert.Empty(t, p.series)
	assert.Empty(t, p.labelSets, "a label set outlived its series")
	assert.Empty(t, p.resources)
}

// A name expfmt quotes goes inside the braces, before the labels, as expfmt writes it.
func TestQuotedNameOpensTheBraces(t *testing.T) {
	cfg := agentConfig()
	cfg.TranslationStrategy = "NoTranslation"
	p, err := newPage(cfg, zap.NewNop())
	require.NoError(t, err)
	md := gaugeBatch(t0, 70, "GPU-a")
	bare := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	bare.SetName("gpu.temperature")
	bare.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(40)
	p.consume(md, t0)
	page := text(p, t0)
	assert.Contains(t, page, "{\"gpu.temperature\",uuid=\"GPU-a\"} 70\n")
	assert.Contains(t, page, "{\"gpu.temperature\"} 40\n")
}
