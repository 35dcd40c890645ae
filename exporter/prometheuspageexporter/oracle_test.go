// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/loopback"
)

// The oracle: the contrib prometheus exporter and this one, given the same settings and the
// same batches, serve the same series with the same values, types and help (order aside).
// Deliberate differences, each checked below rather than ignored:
//   - target_info: contrib shows the attributes of whichever resource of a (job, instance) it
//     meets first at each scrape, so its labels change from scrape to scrape; this exporter
//     shows the attributes all of them share. The test checks job and instance and that every
//     label shown here is in contrib's, with contrib's value.

// shippedConfigs are the prometheus exporter settings of every shipped configuration, by
// file, with the contrib exporter's defaults and its defaults without scope info beside them.
func shippedConfigs(tb testing.TB) map[string]map[string]any {
	tb.Helper()
	t := tb
	files, err := filepath.Glob("../../distro/*.yaml")
	require.NoError(t, err)
	out := map[string]map[string]any{
		"defaults":                         {},
		"defaults-with-suffixes-and-scope": {"translation_strategy": "UnderscoreEscapingWithSuffixes"},
		// The textfile exporter's keys beyond the shipped ones.
		"namespace-and-const-labels": {
			"namespace":                "otelcol.gpu",
			"const_labels":             map[string]any{"cluster": "c1", "site": "eu"},
			"without_scope_info":       true,
			"resource_constant_labels": map[string]any{"included": []any{"*"}},
		},
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc struct {
			Exporters map[string]map[string]any `yaml:"exporters"`
		}
		require.NoError(t, yaml.Unmarshal(raw, &doc), f)
		if settings, ok := doc.Exporters["prometheus_page"]; ok {
			out[filepath.Base(f)] = settings
		}
	}
	require.GreaterOrEqual(t, len(out), 7, "the shipped configurations' prometheus exporters")
	return out
}

// goldenBatches are every golden batch of the repository's receivers and processors: the
// fixture hosts' tasks, the GPUs, the dcgm, semconv and OpenPAI name profiles, attribution,
// the watchdog; and each of them as the gateway receives it (service.instance.id set by the
// agent's resource/identity, service.name by a sender that sets one).
func goldenBatches(t *testing.T) map[string]pmetric.Metrics {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../../receiver/*/testdata/expected/*.yaml", "../../processor/*/testdata/expected/*.yaml"} {
		m, err := filepath.Glob(pattern)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.GreaterOrEqual(t, len(files), 15)
	out := map[string]pmetric.Metrics{}
	for _, f := range files {
		md, err := golden.ReadMetrics(f)
		require.NoError(t, err, f)
		name := strings.TrimPrefix(f, "../../")
		out[name] = md
		gw := pmetric.NewMetrics()
		md.CopyTo(gw)
		for i := 0; i < gw.ResourceMetrics().Len(); i++ {
			attrs := gw.ResourceMetrics().At(i).Resource().Attributes()
			attrs.PutStr("service.instance.id", fmt.Sprintf("10.0.0.%d:9102", i%3))
			attrs.PutStr("service.name", "otelcol-gpu-agent")
		}
		out[name+" via the gateway"] = gw
	}
	out["every point type"] = everyPointType(time.Unix(1_700_000_000, 0))
	return out
}

// everyPointType has a point of each kind the exporters treat apart: int and double gauges,
// an unknown-typed gauge, cumulative and delta counters, a non-monotonic sum, histograms with
// repeated and unsorted bounds, an exponential histogram, a summary, scope attributes, NaN.
func everyPointType(at time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "node-1")
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutStr("service.namespace", "ns")
	rm.Resource().Attributes().PutStr("service.instance.id", "node-1:9102")
	rm.Resource().Attributes().PutInt("gpu.count", 8)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("scope.a")
	sm.Scope().SetVersion("1.2")
	sm.Scope().Attributes().PutStr("team", "gpu")
	sm.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	ts := pcommon.NewTimestampFromTime(at)
	start := pcommon.NewTimestampFromTime(at.Add(-time.Hour))

	g := sm.Metrics().AppendEmpty()
	g.SetName("gpu.temperature")
	g.SetUnit("Cel")
	g.SetDescription("GPU temperature.\nSecond line with a \\ backslash")
	for i, v := range []float64{41.5, 0, 1, -1, 1e-7, 123456789012} {
		dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
		if i > 0 {
			dp = g.Gauge().DataPoints().AppendEmpty()
		}
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(v)
		dp.Attributes().PutStr("gpu", strconv.Itoa(i))
		dp.Attributes().PutStr("quote", `say "hi"`+"\n")
	}
	ig := sm.Metrics().AppendEmpty()
	ig.SetName("gpu.count.int")
	dp := ig.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(-42)
	dp.Attributes().PutBool("ok", true)

	u := sm.Metrics().AppendEmpty()
	u.SetName("legacy_untyped")
	u.Metadata().PutStr("prometheus.type", "unknown")
	dp = u.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetDoubleValue(3)

	c := sm.Metrics().AppendEmpty()
	c.SetName("gpu.energy")
	c.SetUnit("J")
	c.SetEmptySum().SetIsMonotonic(true)
	c.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp = c.Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(ts)
	dp.SetDoubleValue(1.5e6)

	d := sm.Metrics().AppendEmpty()
	d.SetName("requests")
	d.SetUnit("{request}")
	d.SetEmptySum().SetIsMonotonic(true)
	d.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp = d.Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(ts)
	dp.SetIntValue(7)

	n := sm.Metrics().AppendEmpty()
	n.SetName("queue.size")
	n.SetEmptySum().SetIsMonotonic(false)
	n.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp = n.Sum().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetDoubleValue(math.NaN())

	h := sm.Metrics().AppendEmpty()
	h.SetName("scrape.duration")
	h.SetUnit("s")
	h.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := h.Histogram().DataPoints().AppendEmpty()
	hp.SetStartTimestamp(start)
	hp.SetTimestamp(ts)
	hp.ExplicitBounds().FromRaw([]float64{0.5, 0.1, 0.5, 1})
	hp.BucketCounts().FromRaw([]uint64{3, 1, 4, 2, 5})
	hp.SetCount(15)
	hp.SetSum(7.25)

	e := sm.Metrics().AppendEmpty()
	e.SetName("latency.exp")
	e.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := e.ExponentialHistogram().DataPoints().AppendEmpty()
	ep.SetTimestamp(ts)
	ep.SetScale(2)
	ep.SetCount(9)
	ep.SetSum(12.5)
	ep.Positive().BucketCounts().FromRaw([]uint64{4, 5})

	s := sm.Metrics().AppendEmpty()
	s.SetName("rpc.latency")
	s.SetUnit("ms")
	sp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sp.SetStartTimestamp(start)
	sp.SetTimestamp(ts)
	sp.SetCount(10)
	sp.SetSum(55)
	for _, q := range [][2]float64{{0.99, 9}, {0.5, 5}} {
		qv := sp.QuantileValues().AppendEmpty()
		qv.SetQuantile(q[0])
		qv.SetValue(q[1])
	}
	return md
}

// endpoint is a server started for a test: its batches go in, its page comes out.
type endpoint struct {
	exp  exporter.Metrics
	addr string
}

func startExporter(tb testing.TB, f exporter.Factory, settings map[string]any) endpoint {
	tb.Helper()
	t := tb
	port, err := loopback.FreePort()
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := f.CreateDefaultConfig()
	m := maps.Clone(settings)
	m["endpoint"] = addr
	if f.Type().String() == "prometheus" {
		// Synchronous, so that a scrape after ConsumeMetrics sees the batch; the page is the same.
		m["sending_queue"] = map[string]any{"enabled": false}
	}
	require.NoError(t, confmap.NewFromStringMap(m).Unmarshal(cfg))
	exp, err := f.CreateMetrics(t.Context(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	// t.Context() is done before cleanups run; the shutdown keeps only its values.
	shutdownCtx := context.WithoutCancel(t.Context())
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(shutdownCtx)) })
	return endpoint{exp: exp, addr: addr}
}

func (e endpoint) consume(tb testing.TB, md pmetric.Metrics) {
	tb.Helper()
	t := tb
	clone := pmetric.NewMetrics()
	md.CopyTo(clone)
	require.NoError(t, e.exp.ConsumeMetrics(t.Context(), clone))
}

// scrape reads the page; gzip asks for the compressed page (Go's client inflates it).
func (e endpoint) scrape(tb testing.TB, gzip bool) string {
	tb.Helper()
	t := tb
	req, err := http.NewRequest(http.MethodGet, "http://"+e.addr+"/metrics", http.NoBody)
	require.NoError(t, err)
	if !gzip {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// flatten parses a page with expfmt into one line per fact: each family's type and help, each
// sample (histogram buckets, sums and counts, quantiles) with its labels and value. target_info
// series come back apart, by job and instance.
func flatten(page string) (facts map[string]string, targets map[string]map[string]string, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return nil, nil, err
	}
	facts, targets = map[string]string{}, map[string]map[string]string{}
	for name, mf := range families {
		facts["TYPE "+name] = mf.GetType().String()
		facts["HELP "+name] = mf.GetHelp()
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if strings.HasSuffix(name, targetInfo) {
				targets[labels["job"]+" "+labels["instance"]] = labels
				continue
			}
			series := name + seriesLabels(labels)
			if _, dup := facts[series]; dup {
				return nil, nil, fmt.Errorf("series %s twice", series)
			}
			facts[series] = sampleValue(m)
		}
	}
	return facts, targets, nil
}

func seriesLabels(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func sampleValue(m *dto.Metric) string {
	switch {
	case m.Histogram != nil:
		var b strings.Builder
		fmt.Fprintf(&b, "count=%d sum=%v", m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum())
		for _, bk := range m.Histogram.GetBucket() {
			fmt.Fprintf(&b, " le%v=%d", bk.GetUpperBound(), bk.GetCumulativeCount())
		}
		return b.String()
	case m.Summary != nil:
		var b strings.Builder
		fmt.Fprintf(&b, "count=%d sum=%v", m.Summary.GetSampleCount(), m.Summary.GetSampleSum())
		for _, q := range m.Summary.GetQuantile() {
			fmt.Fprintf(&b, " q%v=%v", q.GetQuantile(), q.GetValue())
		}
		return b.String()
	case m.Counter != nil:
		return strconv.FormatFloat(m.Counter.GetValue(), 'g', -1, 64)
	case m.Gauge != nil:
		return strconv.FormatFloat(m.Gauge.GetValue(), 'g', -1, 64)
	default:
		return strconv.FormatFloat(m.Untyped.GetValue(), 'g', -1, 64)
	}
}

// pageDifferences lists how ours differs from contrib's page, one line per fact; empty when
// they agree (target_info as the comment at the top says).
func pageDifferences(contrib, ours string) ([]string, error) {
	want, wantTargets, err := flatten(contrib)
	if err != nil {
		return nil, fmt.Errorf("contrib's page: %w", err)
	}
	got, gotTargets, err := flatten(ours)
	if err != nil {
		return nil, fmt.Errorf("our page: %w", err)
	}
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, "missing "+k+" "+v)
		} else if g != v {
			diffs = append(diffs, fmt.Sprintf("%s: %q, contrib %q", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "extra "+k+" "+v)
		}
	}
	for k, wl := range wantTargets {
		gl, ok := gotTargets[k]
		if !ok {
			diffs = append(diffs, "missing target_info of "+k)
			continue
		}
		for name, v := range gl {
			if wl[name] != v {
				diffs = append(diffs, fmt.Sprintf("target_info of %s: %s=%q, contrib %q", k, name, v, wl[name]))
			}
		}
	}
	for k := range gotTargets {
		if _, ok := wantTargets[k]; !ok {
			diffs = append(diffs, "extra target_info of "+k)
		}
	}
	sort.Strings(diffs)
	return diffs, nil
}

func TestPageEqualsContribForEveryShippedConfigAndGoldenBatch(t *testing.T) {
	configs := shippedConfigs(t)
	batches := goldenBatches(t)
	for cfgName, settings := range configs {
		t.Run(cfgName, func(t *testing.T) {
			compared := 0
			for batchName, md := range batches {
				t.Run(batchName, func(t *testing.T) {
					contrib := startExporter(t, prometheusexporter.NewFactory(), settings)
					ours := startExporter(t, NewFactory(), settings)
					// Twice: the second batch updates every series the first made.
					for range 2 {
						contrib.consume(t, md)
						ours.consume(t, md)
					}
					want := contrib.scrape(t, false)
					got := ours.scrape(t, false)
					diffs, err := pageDifferences(want, got)
					require.NoError(t, err)
					require.Empty(t, diffs, "our page:\n%s", got)
					require.Equal(t, got, ours.scrape(t, true), "the gzip page inflates to the text page")
					facts, _, err := flatten(got)
					require.NoError(t, err)
					compared += len(facts)
				})
			}
			require.Greater(t, compared, 1000, "the series compared: a page with none compares nothing")
		})
	}
}

// The comparison fails on a page with one label changed.
func TestPageDifferencesSeeOneChangedLabel(t *testing.T) {
	settings := shippedConfigs(t)["agent.yaml"]
	md, err := golden.ReadMetrics("../../receiver/gpureceiver/testdata/expected/dgxh100.yaml")
	require.NoError(t, err)
	contrib := startExporter(t, prometheusexporter.NewFactory(), settings)
	ours := startExporter(t, NewFactory(), settings)
	contrib.consume(t, md)
	ours.consume(t, md)
	want, got := contrib.scrape(t, false), ours.scrape(t, false)
	diffs, err := pageDifferences(want, got)
	require.NoError(t, err)
	require.Empty(t, diffs)

	// One label of one series: minor_number="3" becomes "33" on the first line that has it.
	i := strings.Index(got, `minor_number="3"`)
	require.Positive(t, i)
	changed := got[:i] + `minor_number="33"` + got[i+len(`minor_number="3"`):]
	diffs, err = pageDifferences(want, changed)
	require.NoError(t, err)
	require.Len(t, diffs, 2, "one series missing, one extra: %v", diffs)
}
