// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one series of a Prometheus page.
type sample struct {
	labels map[string]string
	value  float64
}

func (s sample) String() string {
	keys := slices.Sorted(maps.Keys(s.labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+s.labels[k])
	}
	return fmt.Sprintf("{%s} %g", strings.Join(parts, ","), s.value)
}

// page is a Prometheus page by family name.
type page map[string][]sample

// scrape fetches a Prometheus page from inside the node's network.
func scrape(url string) (page, error) {
	resp, err := node.HTTP.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	p := page{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			default:
				s.value = m.GetUntyped().GetValue()
			}
			p[name] = append(p[name], s)
		}
	}
	return p, nil
}

// find is the series of family name whose labels include match.
func (p page) find(name string, match map[string]string) []sample {
	var out []sample
	for _, s := range p[name] {
		if matches(s.labels, match) {
			out = append(out, s)
		}
	}
	return out
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// labels is a shorthand for a label set: labels("a", "1", "b", "2").
func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
