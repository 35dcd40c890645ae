// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package contract holds the repository's documents to its code, without a built binary:
// docs/metrics.md (the Prometheus contract) to the metrics the components declare and to the
// checked-in pages of test/e2e, and docs/design.md's pipelines to the shipped configurations.
// The end-to-end test TestPagesInContract (test/e2e) checks the live pages.
package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
)

// root is the repository, seen from this package's directory (where go test runs it). Each
// test changes into it, so that messages name files as the repository does.
const root = "../.."

// nameProfile is the type of the processor whose metrics are other vocabularies' names
// (dcgm-exporter's), documented in its README rather than in the contract.
const nameProfile = "name_profile"

// producer is a component that emits a metric.
type producer struct {
	component string // its type in a configuration: task, gpu, …
	typ       string // what the page's # TYPE line says
	where     string // the file that declares it
}

func loadContract(t *testing.T) *contract.Contract {
	c, err := contract.Load(filepath.Join("docs", "metrics.md"))
	require.NoError(t, err)
	return c
}

// TestContractNamesHaveProducers: each name the contract lists and does not mark planned is
// produced by the components its "from" column names, with its type.
func TestContractNamesHaveProducers(t *testing.T) {
	t.Chdir(root)
	produced := producers(t)
	for _, m := range loadContract(t).Metrics() {
		ps := produced[m.Name]
		if m.Planned {
			if len(ps) > 0 {
				t.Errorf("%s: %s is listed as planned, but %s produces it: move it out of the planned section", m.Where, m.Name, ps[0].where)
			}
			continue
		}
		if len(ps) == 0 {
			t.Errorf("%s: %s has no producer: no component's metadata.yaml declares it and no internal/latency histogram is named so; correct the name, or list it under a heading marked (planned)", m.Where, m.Name)
			continue
		}
		var components []string
		for _, p := range ps {
			components = append(components, p.component)
			if p.typ != m.Type {
				t.Errorf("%s: %s is a %s there, but %s makes it a %s", m.Where, m.Name, m.Type, p.where, p.typ)
			}
		}
		slices.Sort(components)
		from := slices.Sorted(slices.Values(m.From))
		assert.Equal(t, components, from, "%s: the \"from\" column of %s names other components than those that produce it", m.Where, m.Name)
	}
}

// TestProducedNamesAreInContract: every metric a component declares is listed, so the contract
// keeps up with the code.
func TestProducedNamesAreInContract(t *testing.T) {
	t.Chdir(root)
	c := loadContract(t)
	produced := producers(t)
	for _, name := range slices.Sorted(maps.Keys(produced)) {
		ps := produced[name]
		if _, ok := c.Lookup(name); !ok && ps[0].component != nameProfile {
			t.Errorf("%s declares %s, which docs/metrics.md does not list: add it", ps[0].where, name)
		}
	}
}

// TestCheckedInPagesAreInContract: every family on the pages the end-to-end tests compare with
// the collector's real output is listed, with its type.
func TestCheckedInPagesAreInContract(t *testing.T) {
	t.Chdir(root)
	c := loadContract(t)
	pages, err := filepath.Glob(filepath.Join("test", "e2e", "testdata", "*.metrics"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, page := range pages {
		f, err := os.Open(page)
		require.NoError(t, err)
		families, err := contract.PageFamilies(f)
		f.Close()
		require.NoError(t, err, page)
		// The dcgm profile's names (dcgm-exporter's fields) are the name_profile processor's
		// README's to list.
		for name := range families {
			if strings.HasPrefix(name, "DCGM_FI_") {
				delete(families, name)
			}
		}
		for _, problem := range c.CheckPage(families) {
			t.Errorf("%s: %s", page, problem)
		}
	}
}

// producers finds every metric the components emit, by name: those declared in each
// component's metadata.yaml, and the internal/latency histograms (which mdatagen cannot
// declare). With the shipped exporters' UnderscoreEscapingWithoutSuffixes these names are the
// Prometheus names as they are. No shipped configuration creates a metric of its own (a
// transform processor would): if one does, this is where it belongs. Paths are relative to the
// repository root, the current directory.
func producers(t *testing.T) map[string][]producer {
	produced := map[string][]producer{}
	for _, kind := range []string{"receiver", "processor", "exporter", "connector", "extension"} {
		files, err := filepath.Glob(filepath.Join(kind, "*", "metadata.yaml"))
		require.NoError(t, err)
		for _, file := range files {
			var metadata struct {
				Type    string `yaml:"type"`
				Metrics map[string]struct {
					Gauge *struct{} `yaml:"gauge"`
					Sum   *struct {
						Monotonic bool `yaml:"monotonic"`
					} `yaml:"sum"`
				} `yaml:"metrics"`
			}
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(data, &metadata), file)
			for name, m := range metadata.Metrics {
				var typ string
				switch {
				case m.Gauge != nil:
					typ = "gauge"
				case m.Sum != nil && m.Sum.Monotonic:
					typ = "counter"
				case m.Sum != nil:
					typ = "gauge" // the prometheus exporter writes a non-monotonic sum as a gauge
				default:
					t.Errorf("%s: %s is neither a gauge nor a sum", file, name)
				}
				produced[name] = append(produced[name], producer{component: metadata.Type, typ: typ, where: file})
			}
			for _, name := range latencyHistograms(t, filepath.Dir(file)) {
				produced[name] = append(produced[name], producer{component: metadata.Type, typ: "histogram", where: filepath.Dir(file)})
			}
		}
	}
	require.NotEmpty(t, produced)
	return produced
}

const latencyPackage = "github.com/otelcol-gpu/otelcol-gpu/internal/latency"

// latencyHistograms returns the names a component's code (dir and its packages) gives to
// latency.New. A name that is not a constant cannot be read here, and fails the test.
func latencyHistograms(t *testing.T, dir string) []string {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		names = append(names, latencyHistogramsOfPackage(t, path)...)
		return nil
	})
	require.NoError(t, err)
	return names
}

func latencyHistogramsOfPackage(t *testing.T, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	constants := map[string]string{} // the package's string constants, by name
	var calls []*ast.CallExpr
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.CONST {
				for _, spec := range gen.Specs {
					value := spec.(*ast.ValueSpec)
					for i, name := range value.Names {
						if i < len(value.Values) {
							if s, ok := stringLiteral(value.Values[i]); ok {
								constants[name.Name] = s
							}
						}
					}
				}
			}
		}
		calls = append(calls, callsOfLatencyNew(f)...)
	}
	var names []string
	for _, call := range calls {
		name, ok := stringLiteral(call.Args[0])
		if ident, isIdent := call.Args[0].(*ast.Ident); isIdent {
			name, ok = constants[ident.Name]
		}
		if !ok {
			t.Errorf("%s: latency.New is given a name that is not a string constant of its package: the contract test cannot read it", fset.Position(call.Pos()))
			continue
		}
		names = append(names, name)
	}
	return names
}

// callsOfLatencyNew finds the calls of internal/latency's New in f, under whatever name f
// imports the package.
func callsOfLatencyNew(f *ast.File) []*ast.CallExpr {
	local := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == latencyPackage {
			local = "latency"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil
	}
	var calls []*ast.CallExpr
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "New" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == local {
				calls = append(calls, call)
			}
		}
		return true
	})
	return calls
}

func stringLiteral(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
