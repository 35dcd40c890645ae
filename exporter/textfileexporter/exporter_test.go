// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package textfileexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/textfileexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// contractConfig is how distro/ configures the prometheus exporter (the metric contract).
func contractConfig(t *testing.T) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = t.TempDir()
	cfg.TranslationStrategy = "UnderscoreEscapingWithoutSuffixes"
	cfg.WithoutScopeInfo = true
	cfg.ResourceConstantLabels.Included = []string{"*"}
	cfg.WriteInterval = time.Hour // tests write by consuming, unless they say otherwise
	return cfg
}

func start(t *testing.T, cfg *Config) exporter.Metrics {
	t.Helper()
	require.NoError(t, confmap.Validate(cfg))
	exp, err := NewFactory().CreateMetrics(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.WithoutCancel(t.Context()))) })
	return exp
}

// node is a node's and a task's series as the task and gpu receivers shape them: every label a
// resource attribute.
func node(value float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	now := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("node_name", "node-1")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	load := ms.AppendEmpty()
	load.SetName("node_load1")
	dp := load.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(value)
	dp.SetTimestamp(now)

	task := md.ResourceMetrics().AppendEmpty()
	task.Resource().Attributes().PutStr("node_name", "node-1")
	task.Resource().Attributes().PutStr("job_name", "alice~train")
	task.Resource().Attributes().PutStr("minor_number", "0")
	ms = task.ScopeMetrics().AppendEmpty().Metrics()
	util := ms.AppendEmpty()
	util.SetName("gpu_utilization")
	util.SetUnit("%")
	dp = util.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(value)
	dp.SetTimestamp(now)
	cpu := ms.AppendEmpty()
	cpu.SetName("task_cpu_seconds_total")
	cpu.SetUnit("s")
	sum := cpu.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp = sum.DataPoints().AppendEmpty()
	dp.SetDoubleValue(value * 10)
	dp.SetStartTimestamp(now - 1e9)
	dp.SetTimestamp(now)
	lat := ms.AppendEmpty()
	lat.SetName("gpu_nvml_call_duration_seconds")
	hist := lat.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hdp := hist.DataPoints().AppendEmpty()
	hdp.Attributes().PutStr("call", "nvmlDeviceGetUtilizationRates")
	hdp.ExplicitBounds().FromRaw([]float64{0.001, 0.01, 0.1})
	hdp.BucketCounts().FromRaw([]uint64{5, 2, 1, 0})
	hdp.SetCount(8)
	hdp.SetSum(0.05)
	hdp.SetStartTimestamp(now - 1e9)
	hdp.SetTimestamp(now)
	return md
}

func readFile(tb testing.TB, path string) map[string]*dto.MetricFamily {
	tb.Helper()
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	families, err := parse(bytes.NewReader(data))
	require.NoError(tb, err, "%s", data)
	return families
}

// TestWritesThePrometheusExportersPage writes the file from a node's series and compares it
// with testdata/expected.prom (-update rewrites it), and with the page the contrib prometheus
// exporter serves for the same input and settings: the same names, labels and values, less
// the node_* names node_exporter serves itself.
func TestWritesThePrometheusExportersPage(t *testing.T) {
	cfg := contractConfig(t)
	exp := start(t, cfg)
	require.NoError(t, exp.ConsumeMetrics(t.Context(), node(0.5)))
	path := filepath.Join(cfg.Directory, cfg.Filename)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	goldentest.Text(t, filepath.Join("testdata", "expected.prom"), string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o644), fi.Mode().Perm(), "readable by node_exporter's user")

	page := prometheusExporterPage(t, cfg, node(0.5))
	delete(page, "node_load1")
	assert.Equal(t, page, readFile(t, path))
	assert.NotContains(t, readFile(t, path), "node_load1", "exclude_metrics: node_*")
}

// prometheusExporterPage runs the contrib prometheus exporter with cfg's settings on a loopback
// port and returns its page for md.
func prometheusExporterPage(t *testing.T, cfg *Config, md pmetric.Metrics) map[string]*dto.MetricFamily {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	factory := prometheusexporter.NewFactory()
	pcfg := factory.CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"endpoint":           addr,
		"namespace":          cfg.Namespace,
		"const_labels":       cfg.ConstLabels,
		"without_scope_info": cfg.WithoutScopeInfo,
		"metric_expiration":  cfg.MetricExpiration,
		"resource_constant_labels": map[string]any{
			"included": cfg.ResourceConstantLabels.Included,
			"excluded": cfg.ResourceConstantLabels.Excluded,
		},
		"translation_strategy": cfg.TranslationStrategy,
		"sending_queue":        map[string]any{"enabled": false},
	}).Unmarshal(pcfg))
	exp, err := factory.CreateMetrics(t.Context(), exportertest.NewNopSettings(factory.Type()), pcfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(t.Context())) }()
	require.NoError(t, exp.ConsumeMetrics(t.Context(), md))
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	families, err := parse(resp.Body)
	require.NoError(t, err)
	return families
}

// TestStaleSeriesLeave: a series a receiver ends (a data point flagged NoRecordedValue, as
// internal/staleness sends) leaves the file at once; one that stops arriving leaves it after
// metric_expiration, at the next write_interval, without new data.
func TestStaleSeriesLeave(t *testing.T) {
	t.Run("ended", func(t *testing.T) {
		cfg := contractConfig(t)
		exp := start(t, cfg)
		require.NoError(t, exp.ConsumeMetrics(t.Context(), node(1)))
		require.Contains(t, readFile(t, filepath.Join(cfg.Directory, cfg.Filename)), "gpu_utilization")
		ended := node(1)
		ms := ended.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics()
		dp := ms.At(0).Gauge().DataPoints().At(0)
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		dp.SetTimestamp(dp.Timestamp() + 1e9)
		ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() != "gpu_utilization" })
		ended.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool { _, ok := rm.Resource().Attributes().Get("job_name"); return !ok })
		require.NoError(t, exp.ConsumeMetrics(t.Context(), ended))
		families := readFile(t, filepath.Join(cfg.Directory, cfg.Filename))
		assert.NotContains(t, families, "gpu_utilization")
		assert.Contains(t, families, "task_cpu_seconds_total")
	})
	t.Run("expired", func(t *testing.T) {
		cfg := contractConfig(t)
		cfg.MetricExpiration = 50 * time.Millisecond
		cfg.WriteInterval = 10 * time.Millisecond
		exp := start(t, cfg)
		require.NoError(t, exp.ConsumeMetrics(t.Context(), node(1)))
		require.Contains(t, readFile(t, filepath.Join(cfg.Directory, cfg.Filename)), "gpu_utilization")
		poll.Until(t, 30*time.Second, "the series to leave the file after a 50 ms metric_expiration", func() bool {
			return len(readFile(t, filepath.Join(cfg.Directory, cfg.Filename))) == 0
		})
	})
}

// TestReaderNeverSeesATornFile rewrites a file of 1,000 series over and over, every series
// holding the generation's number, while a reader reads and parses it as fast as it can: every
// read must parse and hold all series, of one generation.
func TestReaderNeverSeesATornFile(t *testing.T) {
	cfg := contractConfig(t)
	exp := start(t, cfg)
	path := filepath.Join(cfg.Directory, cfg.Filename)
	const series, generations = 1000, 50
	batch := func(gen int) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("probe")
		dps := m.SetEmptyGauge().DataPoints()
		for i := range series {
			dp := dps.AppendEmpty()
			dp.Attributes().PutStr("series", strconv.Itoa(i))
			dp.Attributes().PutStr("padding", "the file must be large enough for a torn read to show")
			dp.SetIntValue(int64(gen))
		}
		return md
	}
	require.NoError(t, exp.ConsumeMetrics(t.Context(), batch(0)))

	done := make(chan struct{})
	failed := make(chan error, 1)
	var reads int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			reads++
			if err := readWhole(path, series); err != nil {
				failed <- err
				return
			}
		}
	})
	var failure error
	for gen := 1; gen <= generations && failure == nil; gen++ {
		require.NoError(t, exp.ConsumeMetrics(t.Context(), batch(gen)))
		select {
		case failure = <-failed:
		default:
		}
	}
	close(done)
	wg.Wait()
	if failure == nil {
		select {
		case failure = <-failed:
		default:
		}
	}
	require.NoError(t, failure)
	t.Logf("%d reads during %d writes", reads, generations)
	assert.Equal(t, float64(generations), readFile(t, path)["probe"].GetMetric()[0].GetGauge().GetValue())
	leftovers, err := filepath.Glob(filepath.Join(cfg.Directory, ".*.tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers, "no temporary file left behind")
}

// TestShutdownRemovesTheFile: node_exporter must not serve data that is no longer current.
func TestShutdownRemovesTheFile(t *testing.T) {
	cfg := contractConfig(t)
	exp, err := NewFactory().CreateMetrics(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, exp.ConsumeMetrics(t.Context(), node(1)))
	require.FileExists(t, filepath.Join(cfg.Directory, cfg.Filename))
	require.NoError(t, exp.Shutdown(t.Context()))
	entries, err := os.ReadDir(cfg.Directory)
	require.NoError(t, err)
	assert.Empty(t, entries, "file, socket and temporary files are gone")
}

func TestSocketPathTooLong(t *testing.T) {
	cfg := contractConfig(t)
	cfg.Directory = "/" + string(bytes.Repeat([]byte("d"), 120))
	_, err := NewFactory().CreateMetrics(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	assert.ErrorContains(t, err, "too long for the unix socket")
}

func parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// readWhole reads the file once: it must parse and hold n probe series of one generation.
func readWhole(path string, n int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	families, err := parse(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("read %d bytes that do not parse: %w", len(data), err)
	}
	got := families["probe"].GetMetric()
	if len(got) != n {
		return fmt.Errorf("read %d series, want %d", len(got), n)
	}
	for _, m := range got {
		if m.GetGauge().GetValue() != got[0].GetGauge().GetValue() {
			return errors.New("read series of two generations in one file")
		}
	}
	return nil
}

// BenchmarkWrite measures one batch of 10,000 series into the file (a node with 8 GPUs and a
// few hundred tasks is of that order): the prometheus exporter's conversion, its page parsed,
// encoded, synced and renamed.
func BenchmarkWrite(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = b.TempDir()
	cfg.WriteInterval = time.Hour
	exp, err := NewFactory().CreateMetrics(b.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(b, err)
	require.NoError(b, exp.Start(b.Context(), componenttest.NewNopHost()))
	defer func() { require.NoError(b, exp.Shutdown(b.Context())) }()
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	for f := range 100 {
		m := ms.AppendEmpty()
		m.SetName(fmt.Sprintf("task_metric_%d", f))
		dps := m.SetEmptyGauge().DataPoints()
		for i := range 100 {
			dp := dps.AppendEmpty()
			dp.Attributes().PutStr("job_name", fmt.Sprintf("user~job-%d", i))
			dp.Attributes().PutStr("minor_number", strconv.Itoa(i%8))
			dp.SetDoubleValue(float64(i))
		}
	}
	require.NoError(b, exp.ConsumeMetrics(b.Context(), md))
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, exp.ConsumeMetrics(b.Context(), md))
	}
}
