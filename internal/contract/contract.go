// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package contract reads the Prometheus contract, docs/metrics.md, so that tests can hold the
// code and the collector's pages to it. The file's convention, stated at its top:
//
//   - every Markdown table whose first column is headed "metric" lists contract names: each
//     name in backticks in that column, exact; its "type" column starts with gauge, counter or
//     histogram; its "from" column names the producing components by type, in backticks;
//   - the names under a heading that ends in "(planned)", and under its subheadings, have no
//     producer yet.
package contract // import "github.com/otelcol-gpu/otelcol-gpu/internal/contract"

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Metric is one name the contract lists.
type Metric struct {
	Name string
	// Type is what the page's # TYPE line says: gauge, counter or histogram.
	Type string
	// From are the types of the components that produce it (task, gpu, …); empty when planned.
	From []string
	// Planned: listed under a heading that ends in "(planned)", with no producer yet.
	Planned bool
	// Where is the file and line of its table row, for messages.
	Where string
}

// Contract is the set of names docs/metrics.md lists.
type Contract struct {
	metrics map[string]Metric
}

// Load reads the contract from path (docs/metrics.md).
func Load(path string) (*Contract, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

var (
	// metricName is Prometheus' metric name syntax; a backticked token that is not a name (a
	// wildcard such as service_*) cannot be checked, so it is an error.
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	backticked = regexp.MustCompile("`([^`]*)`")
	separator  = regexp.MustCompile(`^\|[-:| ]+$`)
	types      = []string{"gauge", "counter", "histogram"}
)

// Parse reads a contract in docs/metrics.md's convention; source names it in messages.
func Parse(r io.Reader, source string) (*Contract, error) {
	c := &Contract{metrics: map[string]Metric{}}
	var (
		headings []heading
		columns  map[string]int // of the contract table being read; nil outside one
		fenced   bool           // inside a ``` code block, where # is no heading
		lineNo   int
	)
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		lineNo++
		line := strings.TrimSpace(scanner.Text())
		where := fmt.Sprintf("%s:%d", source, lineNo)
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
			columns = nil
		case fenced:
		case strings.HasPrefix(line, "#"):
			headings = nest(headings, line)
			columns = nil
		case !strings.HasPrefix(line, "|"):
			columns = nil
		case columns == nil:
			// A table's header, or a row of a table that is not the contract's.
			cells := splitRow(line)
			columns = map[string]int{} // empty for a table that is not the contract's: skipped
			if !strings.EqualFold(cells[0], "metric") {
				continue
			}
			for i, cell := range cells {
				columns[strings.ToLower(cell)] = i
			}
			for _, want := range []string{"type", "from"} {
				if _, ok := columns[want]; !ok {
					return nil, fmt.Errorf("%s: a contract table needs a %q column", where, want)
				}
			}
		case len(columns) == 0 || separator.MatchString(line):
			// A row of another table, or the line under a header.
		default:
			metrics, err := parseRow(splitRow(line), columns, planned(headings), where)
			if err != nil {
				return nil, err
			}
			for _, m := range metrics {
				if earlier, ok := c.metrics[m.Name]; ok {
					return nil, fmt.Errorf("%s: %s is listed twice (also at %s)", where, m.Name, earlier.Where)
				}
				c.metrics[m.Name] = m
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(c.metrics) == 0 {
		return nil, fmt.Errorf("%s lists no metric: no table has a first column headed \"metric\"", source)
	}
	return c, nil
}

func parseRow(cells []string, columns map[string]int, planned bool, where string) ([]Metric, error) {
	if len(cells) <= max(columns["type"], columns["from"]) {
		return nil, fmt.Errorf("%s: the row has %d cells, fewer than its table's header", where, len(cells))
	}
	typ := strings.ToLower(strings.TrimLeft(cells[columns["type"]], "`*"))
	i := slices.IndexFunc(types, func(t string) bool { return strings.HasPrefix(typ, t) })
	if i < 0 {
		return nil, fmt.Errorf("%s: the type %q does not start with one of %v", where, cells[columns["type"]], types)
	}
	from := backtickedIn(cells[columns["from"]])
	if !planned && len(from) == 0 {
		return nil, fmt.Errorf("%s: no producing component in backticks in the \"from\" column", where)
	}
	names := backtickedIn(cells[0])
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no metric name in backticks in the first column", where)
	}
	metrics := make([]Metric, 0, len(names))
	for _, name := range names {
		if !metricName.MatchString(name) {
			return nil, fmt.Errorf("%s: `%s` is not a metric name: list each name in full", where, name)
		}
		metrics = append(metrics, Metric{Name: name, Type: types[i], From: from, Planned: planned, Where: where})
	}
	return metrics, nil
}

// Lookup returns the contract's entry for name.
func (c *Contract) Lookup(name string) (Metric, bool) {
	m, ok := c.metrics[name]
	return m, ok
}

// Metrics returns every listed name, planned ones included, sorted by name.
func (c *Contract) Metrics() []Metric {
	all := make([]Metric, 0, len(c.metrics))
	for _, name := range slices.Sorted(maps.Keys(c.metrics)) {
		all = append(all, c.metrics[name])
	}
	return all
}

// CheckPage returns one problem for each family of a page (name → type, as PageFamilies reads
// them) that the contract does not list, lists as planned, or lists with another type.
func (c *Contract) CheckPage(families map[string]string) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(families)) {
		m, ok := c.metrics[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%s) is on the page but not in the contract: add it to docs/metrics.md", name, families[name]))
		case m.Planned:
			problems = append(problems, fmt.Sprintf("%s is on the page but %s lists it as planned", name, m.Where))
		case m.Type != families[name]:
			problems = append(problems, fmt.Sprintf("%s is a %s on the page but a %s at %s", name, families[name], m.Type, m.Where))
		}
	}
	return problems
}

// PageFamilies reads the metric families of a Prometheus text page from its # TYPE lines:
// name → gauge, counter, histogram… Sample values are not needed (the checked-in pages of
// test/e2e have none for some series).
func PageFamilies(page io.Reader) (map[string]string, error) {
	families := map[string]string{}
	scanner := bufio.NewScanner(page)
	scanner.Buffer(nil, 1<<20) // a series line with every task label is long
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 4 && fields[0] == "#" && fields[1] == "TYPE" {
			families[fields[2]] = fields[3]
		}
	}
	return families, scanner.Err()
}

// heading is a Markdown heading's level and whether it marks its section planned.
type heading struct {
	level   int
	planned bool
}

// nest returns the headings that enclose line, line's own last.
func nest(enclosing []heading, line string) []heading {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	for len(enclosing) > 0 && enclosing[len(enclosing)-1].level >= level {
		enclosing = enclosing[:len(enclosing)-1]
	}
	title := strings.TrimSpace(strings.TrimLeft(line, "#"))
	return append(enclosing, heading{level: level, planned: strings.HasSuffix(strings.ToLower(title), "(planned)")})
}

func planned(headings []heading) bool {
	return slices.ContainsFunc(headings, func(h heading) bool { return h.planned })
}

// splitRow splits a table row into its trimmed cells. As on GitHub, \| is a | within a cell,
// in code spans too.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	for {
		i := unescapedPipe(line)
		if i < 0 {
			return append(cells, strings.TrimSpace(line))
		}
		cells = append(cells, strings.TrimSpace(line[:i]))
		line = line[i+1:]
	}
}

func unescapedPipe(s string) int {
	for i := range len(s) {
		if s[i] == '|' && (i == 0 || s[i-1] != '\\') {
			return i
		}
	}
	return -1
}

func backtickedIn(cell string) []string {
	var tokens []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		tokens = append(tokens, m[1])
	}
	return tokens
}
