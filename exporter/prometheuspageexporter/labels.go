// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/resourcetotelemetry"
)

// resourceMatcher says which resource attributes become labels under resource_constant_labels,
// with resourcetotelemetry's rules (the contrib exporter's): an excluded key never does; with
// no included pattern every key not excluded does; otherwise a key must match an included one.
// Patterns are globs where * matches any run of characters and ? one character.
type resourceMatcher struct {
	none     bool // neither included nor excluded: no resource attribute is a label
	included []*regexp.Regexp
	excluded []*regexp.Regexp
}

func newResourceMatcher(s resourcetotelemetry.Settings) (*resourceMatcher, error) {
	m := &resourceMatcher{none: len(s.Included) == 0 && len(s.Excluded) == 0}
	var err error
	if m.included, err = globs("included", s.Included); err != nil {
		return nil, err
	}
	if m.excluded, err = globs("excluded", s.Excluded); err != nil {
		return nil, err
	}
	return m, nil
}

func globs(key string, patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		quoted := regexp.QuoteMeta(p)
		re, err := regexp.Compile("(?s)^" + strings.ReplaceAll(strings.ReplaceAll(quoted, `\*`, `.*`), `\?`, `.`) + "$")
		if err != nil {
			return nil, fmt.Errorf("resource_constant_labels: %s pattern %q: %w", key, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func (m *resourceMatcher) matches(key string) bool {
	if m.none {
		return false
	}
	for _, re := range m.excluded {
		if re.MatchString(key) {
			return false
		}
	}
	if len(m.included) == 0 {
		return true
	}
	for _, re := range m.included {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}
