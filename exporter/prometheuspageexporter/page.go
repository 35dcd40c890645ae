// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
)

// The exposition is held in pieces: a family's header, and each resource's series of that
// family. A piece is immutable once made (a new one replaces it), so a scrape writes the
// pieces of a view outside the lock while batches make new ones. A piece keeps its text only
// compressed (about a fourteenth of its size: a gateway's page is mostly its text): a gzip
// scrape writes it as it is, a scrape without gzip inflates it.
type piece struct {
	// deflated is the text compressed on its own and ended by a sync flush: byte-aligned, with
	// no reference to any other piece, so the pieces of a view concatenate into one deflate
	// stream.
	deflated []byte
	size     int    // bytes of text
	crc      uint32 // CRC-32 of the text: the view's, for the gzip trailer, is made of them
}

// family is a Prometheus metric family: its series stay together on the page.
type family struct {
	name string
	// open is what a series line starts with before its labels: the name, or `{"name"` for a
	// name that expfmt quotes inside the braces.
	open   []byte
	quoted bool
	typ    dto.MetricType
	header *piece
	// pieces holds each resource's (or target's) series of this family, by its key.
	pieces map[uint64]*piece
	// conflictLogged: a metric of another type with this name was refused and said so.
	conflictLogged bool
}

// target is one (job, instance): one target_info series, whose labels are the resource
// attributes that all of its resources share.
type target struct {
	key           uint64
	job, instance string
	members       map[*resource]struct{}
}

// source is the resources of one sender: one agent at the gateway (its service.instance.id),
// everything at the agent. Its series of a family are one piece of the page: a batch from one
// agent renders that agent's pieces again, and a piece is big enough to compress well.
type source struct {
	key       uint64
	resources []*resource // in order of arrival
	// order is each family's series, sorted by their rendered name and labels (the order
	// client_golang serves): a page that does not reorder from one collection to the next.
	order map[*family][]*series
	// stale are the families whose series came or went since order was made.
	stale map[*family]struct{}
}

// label is a Prometheus label a resource gives its series or target_info.
type label struct{ name, value string }

// resource holds the series of one OTLP resource (all its attributes alike) and the labels
// that its attributes give every one of them, worked out once when it first arrives.
type resource struct {
	key    uint64
	source *source
	// labels are the resource_constant_labels and job and instance: on every series.
	labels []label
	// overridden are the OTLP keys of labels: a data point attribute of the same key is
	// replaced by the resource's, as resource_constant_labels does in the contrib exporter.
	overridden []string
	// labelSum is the hash sum (see attrSum) of the labels every series of res has: part of
	// each series' key, as they are part of its identity.
	labelSum uint64
	labelErr error
	// targetLabels are the attributes target_info can show, sorted by name; nil without job
	// and instance.
	targetLabels []label
	target       *target

	series []*series // in no order
	oldest int64     // the arrival (Unix nanoseconds) of the series that arrived longest ago
}

type seriesKind uint8

const (
	numberSeries seriesKind = iota
	histogramSeries
	summarySeries
)

// series is one Prometheus series and its last point. A gateway holds one per series of every
// node, so it is kept small: its labels are shared, and what only histograms and summaries
// have is apart.
type series struct {
	key       uint64
	res       *resource // the resource whose point it shows: the last one to arrive
	fam       *family
	labels    *labelSet
	ts, start pcommon.Timestamp
	arrived   int64 // Unix nanoseconds
	value     float64
	kind      seriesKind
	dist      *distribution // histograms and summaries
}

// distribution is the point of a histogram or summary series.
type distribution struct {
	labels      []*dto.LabelPair // rendered through expfmt
	count       uint64
	sum         float64
	bounds      []float64
	buckets     []uint64
	quantiles   map[float64]float64
	countOnlyEx bool // an exponential histogram: count and sum only in the text format
}

// labelSet is the labels of the series that share a resource's labels, a data point's
// attributes and a scope: every metric a GPU or a container reports has the same ones, so a
// set is rendered once and held once for all of them.
type labelSet struct {
	key uint64
	// body is `{labels}` as expfmt writes it after a name; empty without labels.
	body  []byte
	count int // labels in it: client_golang orders a family's series by it first
	refs  int // series using it
}

// nameKey caches a metric's Prometheus name: building it is the costliest step per metric.
type nameKey struct {
	name, unit string
	typ        otlptranslator.MetricType
}

// page is the exposition and the state behind it.
type page struct {
	logger           *zap.Logger
	metricNamer      otlptranslator.MetricNamer
	labelNamer       otlptranslator.LabelNamer
	withoutScopeInfo bool
	resourceLabels   *resourceMatcher
	expiration       time.Duration
	constLabels      []label
	// targetInfo is target_info's name, in the namespace if there is one.
	targetInfo string

	mu        sync.Mutex
	names     map[nameKey]string
	families  map[string]*family
	resources map[uint64]*resource
	sources   map[uint64]*source
	// series are all series by their identity, as the contrib exporter's: name, type, scope,
	// labels. Two resources that give a series the same labels share it, the last point wins.
	series map[uint64]*series
	// labelSets are the series' labels, each set held once, by its identity.
	labelSets map[uint64]*labelSet
	// refused are series whose labels cannot be made: refused once and said once while they keep
	// coming, forgotten like a series once they stop (so a stream of distinct bad series costs
	// memory for one expiration, not for the exporter's life).
	refused refusedSeries
	// dirty are the sources to render again once the batch is in.
	dirty      map[*source]struct{}
	targets    map[uint64]*target
	nextExpiry time.Time
	current    *view // nil once anything changed

	deflater *flate.Writer
	scratch  bytes.Buffer
	// text is the buffer a piece is rendered in before it is compressed.
	text []byte
}

func newPage(cfg *Config, logger *zap.Logger) (*page, error) {
	matcher, err := newResourceMatcher(cfg.ResourceConstantLabels)
	if err != nil {
		return nil, err
	}
	strategy := cfg.strategy()
	p := &page{
		logger:           logger,
		metricNamer:      otlptranslator.MetricNamer{Namespace: cfg.Namespace, WithMetricSuffixes: strategy.ShouldAddSuffixes(), UTF8Allowed: !strategy.ShouldEscape()},
		labelNamer:       otlptranslator.LabelNamer{UTF8Allowed: !strategy.ShouldEscape(), PreserveMultipleUnderscores: true},
		withoutScopeInfo: cfg.WithoutScopeInfo,
		resourceLabels:   matcher,
		expiration:       cfg.MetricExpiration,
		names:            map[nameKey]string{},
		families:         map[string]*family{},
		resources:        map[uint64]*resource{},
		series:           map[uint64]*series{},
		labelSets:        map[uint64]*labelSet{},
		refused:          newRefusedSeries(cfg.MetricExpiration),
		sources:          map[uint64]*source{},
		dirty:            map[*source]struct{}{},
		targets:          map[uint64]*target{},
	}
	p.targetInfo = targetInfo
	if cfg.Namespace != "" {
		// As the contrib exporter: a namespace the label namer refuses is no namespace.
		if ns, nsErr := p.labelNamer.Build(cfg.Namespace); nsErr == nil {
			p.targetInfo = ns + "_" + targetInfo
		} else {
			logger.Error("namespace ignored for target_info", zap.String("namespace", cfg.Namespace), zap.Error(nsErr))
		}
	}
	for name, value := range cfg.ConstLabels {
		p.constLabels = append(p.constLabels, label{name, value})
	}
	p.deflater, err = flate.NewWriter(&p.scratch, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// consume takes a batch that arrived at now: each resource's series are updated and its part
// of the page rendered again.
func (p *page) consume(md pmetric.Metrics, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused.age(now)
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		p.consumeResource(rms.At(i), now)
	}
	p.renderDirty()
	p.expireDue(now)
}

func (p *page) consumeResource(rm pmetric.ResourceMetrics, now time.Time) {
	attrs := rm.Resource().Attributes()
	key := mix(attrSum(attrs))
	res, ok := p.resources[key]
	if !ok {
		res = p.newResource(key, attrs)
	}
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		sc := scope{sm: sms.At(i), key: scopeHash(sms.At(i))}
		ms := sc.sm.Metrics()
		for j := 0; j < ms.Len(); j++ {
			p.consumeMetric(res, sc, ms.At(j), now)
		}
	}
	if !ok {
		p.dirty[res.source] = struct{}{} // a resource that brings no series leaves at once
	}
}

// scope is a batch's scope and its hash.
type scope struct {
	sm  pmetric.ScopeMetrics
	key uint64
}

func (p *page) newResource(key uint64, attrs pcommon.Map) *resource {
	res := &resource{key: key}
	p.resources[key] = res
	var errs []error
	for k, v := range attrs.All() {
		if !p.resourceLabels.matches(k) {
			continue
		}
		name, err := p.labelNamer.Build(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.labels = append(res.labels, label{name, v.AsString()})
		res.overridden = append(res.overridden, k)
		res.labelSum += pairHash(k, v)
	}
	res.labelErr = errors.Join(errs...)
	job, hasJob := jobOf(attrs)
	instance, hasInstance := instanceOf(attrs)
	if hasJob {
		res.labels = append(res.labels, label{model.JobLabel, job})
		res.labelSum += pairHash("\xffjob", pcommon.NewValueStr(job))
	}
	if hasInstance {
		res.labels = append(res.labels, label{model.InstanceLabel, instance})
		res.labelSum += pairHash("\xffinstance", pcommon.NewValueStr(instance))
	}
	if job != "" && instance != "" {
		p.joinTarget(res, attrs, job, instance)
	}
	srcKey := xxhash.Sum64String(instance)
	src, ok := p.sources[srcKey]
	if !ok {
		src = &source{key: srcKey, order: map[*family][]*series{}, stale: map[*family]struct{}{}}
		p.sources[srcKey] = src
	}
	src.resources = append(src.resources, res)
	res.source = src
	return res
}

// jobOf and instanceOf are the contrib exporter's job and instance: service.namespace/service.name
// and service.instance.id.
func jobOf(attrs pcommon.Map) (string, bool) {
	name, ok := attrs.Get("service.name")
	if !ok {
		return "", false
	}
	if ns, ok := attrs.Get("service.namespace"); ok {
		return ns.AsString() + "/" + name.AsString(), true
	}
	return name.AsString(), true
}

func instanceOf(attrs pcommon.Map) (string, bool) {
	v, ok := attrs.Get("service.instance.id")
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

// consumeMetric takes a metric's points into res.
func (p *page) consumeMetric(res *resource, sc scope, m pmetric.Metric, now time.Time) {
	fam, ok := p.familyOf(m)
	if !ok {
		return
	}
	metricKey := xxhash.Sum64String(m.Name()) ^ uint64(m.Type())*0x9E3779B97F4A7C15 ^ sc.key
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			p.numberPoint(res, fam, sc, metricKey, dps.At(i), false, now)
		}
	case pmetric.MetricTypeSum:
		sum := m.Sum()
		if sum.AggregationTemporality() == pmetric.AggregationTemporalityUnspecified ||
			(sum.AggregationTemporality() == pmetric.AggregationTemporalityDelta && !sum.IsMonotonic()) {
			return // as the contrib exporter: neither can become a Prometheus series
		}
		delta := sum.AggregationTemporality() == pmetric.AggregationTemporalityDelta
		dps := sum.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			p.numberPoint(res, fam, sc, metricKey, dps.At(i), delta, now)
		}
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			p.histogramPoint(res, fam, sc, metricKey, dps.At(i), h.AggregationTemporality(), now)
		}
	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			p.exponentialPoint(res, fam, sc, metricKey, dps.At(i), h.AggregationTemporality(), now)
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			p.summaryPoint(res, fam, sc, metricKey, dps.At(i), now)
		}
	}
}

// familyOf finds or makes the family of m; a metric of another type than its family's is
// refused, as the contrib exporter refuses it (the first type seen stays).
func (p *page) familyOf(m pmetric.Metric) (*family, bool) {
	typ, tm, ok := familyType(m)
	if !ok {
		return nil, false
	}
	nk := nameKey{m.Name(), m.Unit(), tm}
	name, ok := p.names[nk]
	if !ok {
		var err error
		name, err = p.metricNamer.Build(otlptranslator.Metric{Name: m.Name(), Unit: m.Unit(), Type: tm})
		if !p.metricNamer.UTF8Allowed {
			// The namer leaves the namespace as it is; promhttp escapes what is left for a
			// scraper of legacy names, as every scraper of an escaping strategy is.
			name = model.EscapeName(name, model.UnderscoreEscaping)
		}
		if err == nil && !model.UTF8Validation.IsValidMetricName(name) {
			err = fmt.Errorf("%q is not a valid metric name", name)
		}
		if err != nil {
			p.logger.Warn("metric dropped: no Prometheus name", zap.String("metric", m.Name()), zap.Error(err))
			name = ""
		}
		p.names[nk] = name
	}
	if name == "" {
		return nil, false
	}
	fam, ok := p.families[name]
	if !ok {
		fam = p.newFamily(name, m.Description(), typ)
		p.families[name] = fam
		return fam, true
	}
	if fam.typ != typ {
		if !fam.conflictLogged {
			fam.conflictLogged = true
			p.logger.Warn("metric dropped: its Prometheus name has another type already",
				zap.String("metric", m.Name()), zap.String("name", name), zap.Stringer("type", typ), zap.Stringer("existing", fam.typ))
		}
		return nil, false
	}
	return fam, true
}

func (p *page) newFamily(name, help string, typ dto.MetricType) *family {
	fam := &family{name: name, typ: typ, pieces: map[uint64]*piece{}}
	fam.header = p.makePiece(headerText(name, help, typ))
	// A name expfmt quotes opens the braces its labels go in: `{"name"}` without labels.
	fam.open = seriesPrefix(name, nil)
	if fam.quoted = bytes.HasPrefix(fam.open, []byte("{")); fam.quoted {
		fam.open = bytes.TrimSuffix(fam.open, []byte("}"))
	}
	return fam
}

func familyType(m pmetric.Metric) (dto.MetricType, otlptranslator.MetricType, bool) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		// A gauge stays a gauge even with prometheus.type "unknown" in its metadata: the
		// contrib exporter's accumulator loses the metadata before it would look.
		return dto.MetricType_GAUGE, otlptranslator.MetricTypeGauge, true
	case pmetric.MetricTypeSum:
		if m.Sum().IsMonotonic() {
			return dto.MetricType_COUNTER, otlptranslator.MetricTypeMonotonicCounter, true
		}
		return dto.MetricType_GAUGE, otlptranslator.MetricTypeNonMonotonicCounter, true
	case pmetric.MetricTypeHistogram:
		return dto.MetricType_HISTOGRAM, otlptranslator.MetricTypeHistogram, true
	case pmetric.MetricTypeExponentialHistogram:
		return dto.MetricType_HISTOGRAM, otlptranslator.MetricTypeExponentialHistogram, true
	case pmetric.MetricTypeSummary:
		return dto.MetricType_SUMMARY, otlptranslator.MetricTypeSummary, true
	}
	return 0, 0, false
}

// point is what every data point type has.
type point interface {
	Attributes() pcommon.Map
	Timestamp() pcommon.Timestamp
	StartTimestamp() pcommon.Timestamp
	Flags() pmetric.DataPointFlags
}

// lookup finds the series of dp, making it if it is new. It returns nil when the point ends
// its series (no recorded value: the series leaves the page at once) or cannot be a series.
// A series found may belong to another resource: claim moves it once its point is taken.
func (p *page) lookup(res *resource, fam *family, sc scope, metricKey uint64, dp point, kind seriesKind) (s *series, created bool) {
	labelKey := mix(attrSum(dp.Attributes(), res.overridden...) + res.labelSum)
	if !p.withoutScopeInfo {
		labelKey = mix(labelKey ^ sc.key) // the otel_scope_* labels
	}
	key := mix(metricKey ^ labelKey)
	if dp.Flags().NoRecordedValue() {
		if old, ok := p.series[key]; ok {
			p.remove(old)
		}
		return nil, false
	}
	if found, ok := p.series[key]; ok {
		return found, false
	}
	if p.refused.seen(key) {
		return nil, false
	}
	ls, labels, err := p.labelSetOf(labelKey, res, sc, dp.Attributes(), kind != numberSeries)
	if err != nil {
		p.refused.add(key)
		p.logger.Warn("series dropped: its labels cannot be Prometheus labels", zap.String("metric", fam.name), zap.Error(err))
		return nil, false
	}
	s = &series{key: key, res: res, fam: fam, kind: kind, labels: ls}
	if kind != numberSeries {
		s.dist = &distribution{labels: labels}
	}
	p.series[key] = s
	res.add(s)
	p.dirty[res.source] = struct{}{}
	return s, true
}

// claim gives s to res, whose point it now shows, and marks res to be rendered.
func (p *page) claim(s *series, res *resource) {
	p.dirty[res.source] = struct{}{}
	if s.res == res {
		return
	}
	s.res.drop(s)
	p.dirty[s.res.source] = struct{}{}
	s.res = res
	res.add(s)
}

// labelSetOf finds or makes the label set of key, and returns its labels as expfmt takes them
// when asked (a histogram or summary renders through expfmt).
func (p *page) labelSetOf(key uint64, res *resource, sc scope, attrs pcommon.Map, withLabels bool) (*labelSet, []*dto.LabelPair, error) {
	ls, ok := p.labelSets[key]
	if ok && !withLabels {
		ls.refs++
		return ls, nil, nil
	}
	labels, err := p.seriesLabels(res, sc.sm, attrs)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		ls = &labelSet{key: key, body: labelBody(labels), count: len(labels)}
		p.labelSets[key] = ls
	}
	ls.refs++
	return ls, labels, nil
}

// remove ends s.
func (p *page) remove(s *series) {
	delete(p.series, s.key)
	s.labels.refs--
	if s.labels.refs == 0 {
		delete(p.labelSets, s.labels.key)
	}
	s.res.drop(s)
	p.dirty[s.res.source] = struct{}{}
}

// seriesLabels are a new series' labels, checked as client_golang checks them.
func (p *page) seriesLabels(res *resource, sm pmetric.ScopeMetrics, attrs pcommon.Map) ([]*dto.LabelPair, error) {
	if res.labelErr != nil {
		return nil, res.labelErr
	}
	labels := make([]*dto.LabelPair, 0, attrs.Len()+len(res.labels)+3)
	for k, v := range attrs.All() {
		if slices.Contains(res.overridden, k) {
			continue
		}
		name, err := p.labelNamer.Build(k)
		if err != nil {
			return nil, err
		}
		labels = append(labels, labelPair(name, v.AsString()))
	}
	if !p.withoutScopeInfo {
		scope := sm.Scope()
		for k, v := range scope.Attributes().All() {
			if k == "name" || k == "version" || k == "schema_url" {
				continue
			}
			name, err := p.labelNamer.Build("otel_scope_" + k)
			if err != nil {
				return nil, err
			}
			labels = append(labels, labelPair(name, v.AsString()))
		}
		labels = append(labels,
			labelPair("otel_scope_name", scope.Name()),
			labelPair("otel_scope_version", scope.Version()),
			labelPair("otel_scope_schema_url", sm.SchemaUrl()))
	}
	for _, l := range res.labels {
		labels = append(labels, labelPair(l.name, l.value))
	}
	for _, l := range p.constLabels {
		labels = append(labels, labelPair(l.name, l.value))
	}
	sort.Slice(labels, func(i, j int) bool { return labels[i].GetName() < labels[j].GetName() })
	for i, l := range labels {
		if !model.UTF8Validation.IsValidLabelName(l.GetName()) || strings.HasPrefix(l.GetName(), model.ReservedLabelPrefix) {
			return nil, fmt.Errorf("%q is not a valid label name", l.GetName())
		}
		if i > 0 && labels[i-1].GetName() == l.GetName() {
			return nil, fmt.Errorf("two attributes become the label %q", l.GetName())
		}
		if !utf8.ValidString(l.GetValue()) {
			return nil, fmt.Errorf("label %q: value %q is not valid UTF-8", l.GetName(), l.GetValue())
		}
	}
	return labels, nil
}

func labelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: &name, Value: &value}
}

// older says whether a point is older than the one its series holds: an agent replaying its
// queue after an outage must not turn a series back.
func older(s *series, ts pcommon.Timestamp) bool { return ts < s.ts }

func (p *page) numberPoint(res *resource, fam *family, sc scope, metricKey uint64, dp pmetric.NumberDataPoint, delta bool, now time.Time) {
	s, created := p.lookup(res, fam, sc, metricKey, dp, numberSeries)
	if s == nil {
		return
	}
	if !created && older(s, dp.Timestamp()) {
		return
	}
	v := numberValue(dp)
	start := dp.StartTimestamp()
	if delta && !created && start == s.ts {
		// A delta that continues the series adds to it, as the contrib exporter accumulates.
		v += s.value
		start = s.start
	}
	p.claim(s, res)
	s.value, s.ts, s.start, s.arrived = v, dp.Timestamp(), start, now.UnixNano()
}

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

func (p *page) histogramPoint(res *resource, fam *family, sc scope, metricKey uint64, dp pmetric.HistogramDataPoint, temporality pmetric.AggregationTemporality, now time.Time) {
	s, created := p.lookup(res, fam, sc, metricKey, dp, histogramSeries)
	if s == nil {
		return
	}
	bounds, buckets := dp.ExplicitBounds().AsRaw(), dp.BucketCounts().AsRaw()
	count, sum, start := dp.Count(), dp.Sum(), dp.StartTimestamp()
	ts := dp.Timestamp()
	if !created {
		switch temporality {
		case pmetric.AggregationTemporalityCumulative:
			if older(s, ts) {
				return
			}
		case pmetric.AggregationTemporalityDelta:
			if start != s.ts {
				if start <= s.ts {
					return // misaligned: neither a continuation nor a reset
				}
				break // a reset: the point replaces the series
			}
			start = s.start
			if ts < s.ts {
				ts = s.ts
			}
			if d := s.dist; slices.Equal(bounds, d.bounds) && len(buckets) == len(d.buckets) {
				for i := range buckets {
					buckets[i] += d.buckets[i]
				}
				count += d.count
				sum += d.sum
			}
		default:
			return
		}
	}
	p.claim(s, res)
	s.dist.bounds, s.dist.buckets, s.dist.count, s.dist.sum = bounds, buckets, count, sum
	s.ts, s.start, s.arrived = ts, start, now.UnixNano()
}

// exponentialPoint keeps an exponential histogram's count and sum: the text format has no
// native buckets, so they are all its page shows (and all the contrib exporter's page shows).
func (p *page) exponentialPoint(res *resource, fam *family, sc scope, metricKey uint64, dp pmetric.ExponentialHistogramDataPoint, temporality pmetric.AggregationTemporality, now time.Time) {
	if scale := dp.Scale(); scale < -4 || !dp.HasSum() {
		p.logger.Debug("exponential histogram point dropped: scale below -4 or no sum", zap.String("metric", fam.name))
		return
	}
	s, created := p.lookup(res, fam, sc, metricKey, dp, histogramSeries)
	if s == nil {
		return
	}
	count, sum, start, ts := dp.Count(), dp.Sum(), dp.StartTimestamp(), dp.Timestamp()
	if !created {
		switch temporality {
		case pmetric.AggregationTemporalityCumulative:
			if older(s, ts) {
				return
			}
		case pmetric.AggregationTemporalityDelta:
			if start != s.ts {
				if start <= s.ts {
					return
				}
				break
			}
			start, count, sum = s.start, count+s.dist.count, sum+s.dist.sum
			if ts < s.ts {
				ts = s.ts
			}
		default:
			return
		}
	}
	p.claim(s, res)
	s.dist.countOnlyEx = true
	s.dist.count, s.dist.sum = count, sum
	s.ts, s.start, s.arrived = ts, start, now.UnixNano()
}

func (p *page) summaryPoint(res *resource, fam *family, sc scope, metricKey uint64, dp pmetric.SummaryDataPoint, now time.Time) {
	s, created := p.lookup(res, fam, sc, metricKey, dp, summarySeries)
	if s == nil {
		return
	}
	if !created && older(s, dp.Timestamp()) {
		return
	}
	p.claim(s, res)
	qv := dp.QuantileValues()
	s.dist.quantiles = make(map[float64]float64, qv.Len())
	for i := 0; i < qv.Len(); i++ {
		s.dist.quantiles[qv.At(i).Quantile()] = qv.At(i).Value()
	}
	s.dist.count, s.dist.sum = dp.Count(), dp.Sum()
	s.ts, s.start, s.arrived = dp.Timestamp(), dp.StartTimestamp(), now.UnixNano()
}

// add puts s in res's list.
func (res *resource) add(s *series) {
	res.series = append(res.series, s)
	res.source.stale[s.fam] = struct{}{}
}

// drop takes s out of res's list.
func (res *resource) drop(s *series) {
	res.source.stale[s.fam] = struct{}{}
	i := slices.Index(res.series, s)
	last := len(res.series) - 1
	res.series[i] = res.series[last]
	res.series[last] = nil
	res.series = res.series[:last]
}

// renderDirty renders the sources a batch or a sweep changed.
func (p *page) renderDirty() {
	for src := range p.dirty {
		p.render(src)
	}
	clear(p.dirty)
}

// render makes src's pieces again, one per family it has series in, and drops the resources
// that have none left.
func (p *page) render(src *source) {
	p.current = nil
	regathered := map[*family][]*series{}
	kept := src.resources[:0]
	for _, res := range src.resources {
		if len(res.series) == 0 {
			delete(p.resources, res.key)
			p.leaveTarget(res)
			continue
		}
		kept = append(kept, res)
		res.oldest = math.MaxInt64
		for _, s := range res.series {
			res.oldest = min(res.oldest, s.arrived)
			if _, stale := src.stale[s.fam]; stale {
				regathered[s.fam] = append(regathered[s.fam], s)
			}
		}
		if next := time.Unix(0, res.oldest).Add(p.expiration); p.nextExpiry.IsZero() || next.Before(p.nextExpiry) {
			p.nextExpiry = next
		}
	}
	clear(src.resources[len(kept):])
	src.resources = kept
	for fam := range src.stale {
		list, ok := regathered[fam]
		if !ok {
			delete(src.order, fam)
			p.dropPiece(fam, src.key)
			continue
		}
		slices.SortFunc(list, seriesOrder)
		src.order[fam] = list
	}
	clear(src.stale)
	for fam, list := range src.order {
		text := p.text[:0]
		for _, s := range list {
			text = p.appendSeries(text, s)
		}
		fam.pieces[src.key] = p.makePiece(text)
		p.text = text
	}
	if len(src.resources) == 0 {
		delete(p.sources, src.key)
	}
}

// seriesOrder is client_golang's order of a family's series: fewer labels first, then by
// labels (here by the rendered labels, names included; client_golang compares the values).
func seriesOrder(a, b *series) int {
	if a.labels.count != b.labels.count {
		return a.labels.count - b.labels.count
	}
	return bytes.Compare(a.labels.body, b.labels.body) // a family's series share their name
}

func (p *page) dropPiece(fam *family, key uint64) {
	if _, ok := fam.pieces[key]; !ok {
		return
	}
	delete(fam.pieces, key)
	if len(fam.pieces) == 0 {
		delete(p.families, fam.name)
	}
}

func (*page) appendSeries(text []byte, s *series) []byte {
	if s.kind == numberSeries {
		text = appendPrefix(text, s.fam, s.labels)
		text = append(text, ' ')
		text = appendFloat(text, s.value)
		return append(text, '\n')
	}
	d := s.dist
	m := &dto.Metric{Label: d.labels}
	switch {
	case s.kind == summarySeries:
		q := make([]*dto.Quantile, 0, len(d.quantiles))
		for quantile, value := range d.quantiles {
			q = append(q, &dto.Quantile{Quantile: &quantile, Value: &value})
		}
		sort.Slice(q, func(i, j int) bool { return q[i].GetQuantile() < q[j].GetQuantile() })
		m.Summary = &dto.Summary{SampleCount: &d.count, SampleSum: &d.sum, Quantile: q}
	case d.countOnlyEx:
		m.Histogram = &dto.Histogram{SampleCount: &d.count, SampleSum: &d.sum}
	default:
		m.Histogram = &dto.Histogram{SampleCount: &d.count, SampleSum: &d.sum, Bucket: cumulativeBuckets(d.bounds, d.buckets)}
	}
	return appendExpfmtLine(text, s.fam.name, s.fam.typ, m)
}

// appendPrefix writes a series' `name{labels}` as expfmt writes it.
func appendPrefix(text []byte, fam *family, ls *labelSet) []byte {
	text = append(text, fam.open...)
	switch {
	case !fam.quoted:
		return append(text, ls.body...)
	case len(ls.body) == 0:
		return append(text, '}')
	default:
		text = append(text, ',')
		return append(text, ls.body[1:]...)
	}
}

// cumulativeBuckets are the classic buckets as the contrib exporter makes them: each distinct
// bound once (the first bucket of a repeated bound counts), in order, counts summed up to it.
func cumulativeBuckets(bounds []float64, counts []uint64) []*dto.Bucket {
	first := map[float64]int{}
	distinct := make([]float64, 0, len(bounds))
	for i, b := range bounds {
		if _, seen := first[b]; !seen {
			first[b] = i
			distinct = append(distinct, b)
		}
	}
	sort.Float64s(distinct)
	out := make([]*dto.Bucket, 0, len(distinct))
	var cum uint64
	for _, b := range distinct {
		if i := first[b]; i < len(counts) {
			cum += counts[i]
		}
		upper, c := b, cum
		out = append(out, &dto.Bucket{UpperBound: &upper, CumulativeCount: &c})
	}
	return out
}

// appendExpfmtLine renders one series with expfmt, without the family's TYPE line.
func appendExpfmtLine(text []byte, name string, typ dto.MetricType, m *dto.Metric) []byte {
	var buf bytes.Buffer
	if _, err := expfmt.MetricFamilyToText(&buf, &dto.MetricFamily{Name: &name, Type: &typ, Metric: []*dto.Metric{m}}); err != nil {
		return text // the series was checked when made: expfmt has nothing left to refuse
	}
	b := buf.Bytes()
	return append(text, b[bytes.IndexByte(b, '\n')+1:]...)
}

// labelBody is `{labels}` as expfmt writes it after a name that needs no quotes; empty
// without labels.
func labelBody(labels []*dto.LabelPair) []byte {
	return bytes.TrimPrefix(seriesPrefix("x", labels), []byte("x"))
}

// seriesPrefix is `name{labels}` as expfmt writes it.
func seriesPrefix(name string, labels []*dto.LabelPair) []byte {
	line := appendExpfmtLine(nil, name, dto.MetricType_GAUGE, &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: new(float64)}})
	return bytes.TrimSuffix(line, []byte(" 0\n"))
}

// headerText is a family's HELP and TYPE lines, as expfmt writes them.
func headerText(name, help string, typ dto.MetricType) []byte {
	var buf bytes.Buffer
	zero, n := 0.0, uint64(0)
	m := &dto.Metric{}
	switch typ {
	case dto.MetricType_HISTOGRAM:
		m.Histogram = &dto.Histogram{SampleCount: &n, SampleSum: &zero}
	case dto.MetricType_SUMMARY:
		m.Summary = &dto.Summary{SampleCount: &n, SampleSum: &zero}
	default:
		m.Gauge = &dto.Gauge{Value: &zero}
		m.Counter = &dto.Counter{Value: &zero}
		m.Untyped = &dto.Untyped{Value: &zero}
	}
	_, _ = expfmt.MetricFamilyToText(&buf, &dto.MetricFamily{Name: &name, Help: &help, Type: &typ, Metric: []*dto.Metric{m}})
	b := buf.Bytes()
	help1 := bytes.IndexByte(b, '\n') + 1
	return b[:help1+bytes.IndexByte(b[help1:], '\n')+1]
}

// makePiece compresses text on its own, ending in a sync flush (see piece).
func (p *page) makePiece(text []byte) *piece {
	p.scratch.Reset()
	p.deflater.Reset(&p.scratch)
	_, _ = p.deflater.Write(text)
	_ = p.deflater.Flush()
	return &piece{deflated: bytes.Clone(p.scratch.Bytes()), size: len(text), crc: crc32.ChecksumIEEE(text)}
}
