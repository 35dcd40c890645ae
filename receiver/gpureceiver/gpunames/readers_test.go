// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpunames

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readers are the packages that read the gpu receiver's output, from the module's root: they
// take its names from this package. cmd/gpureport/internal/demo, which writes a week of the
// receiver's series, is left out until its rework (issue 32's demo.Write split) lands.
var readers = []string{
	"processor/gpuattributionprocessor",
	"processor/nameprofileprocessor",
	"processor/gpuhealthfilterprocessor",
	"connector/k8sgpuhealthconnector",
	"connector/jobrecordconnector",
	"receiver/gpureceiver/gpureceivertest",
	"cmd/gpureport",
	"internal/healthdata",
}

// spelledOtherwise are literals that equal a name of the receiver but mean something else, by
// file (from the module's root): a key's value is not the key.
var spelledOtherwise = map[string][]string{
	// The CSV columns are the report's own format, documented with the report.
	"cmd/gpureport/internal/report/write.go": {"name", "node_name", "minor_number", "uuid", "xid", "resolution"},
	// Prometheus's TYPE of a series.
	"cmd/gpureport/internal/fixture/fixture.go": {"counter"},
	// The value of the semantic conventions' error.type.
	"processor/nameprofileprocessor/profiles.go": {"xid"},
	// The attribute NVIDIA's DRA driver names a device's GPU by in its ResourceSlices.
	"connector/k8sgpuhealthconnector/devicetaint.go": {"uuid"},
}

// spelled lists the string literals in the non-test, non-generated Go files under dir that
// equal one of names, as "file:line: literal". Struct tags are not literals here.
func spelled(t *testing.T, root, dir string, names map[string]bool) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "cmd/gpureport/internal/demo" || d.Name() == "metadata") {
			return filepath.SkipDir // the demo (see readers); a component's own generated names
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		// Struct tags and the keys of log fields (zap.String("reason", ...)) are no output names.
		other := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if n.Tag != nil {
					other[n.Tag] = true
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) > 0 {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "zap" {
						if lit, ok := n.Args[0].(*ast.BasicLit); ok {
							other[lit] = true
						}
					}
				}
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || other[lit] {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && names[s] && !slices.Contains(spelledOtherwise[filepath.ToSlash(rel)], s) {
				found = append(found, fmt.Sprintf("%s: %s", fset.Position(lit.Pos()), lit.Value))
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return found
}

// TestReadersSpellNoName: no reader spells a metric, event or label key of the receiver by hand.
func TestReadersSpellNoName(t *testing.T) {
	names := map[string]bool{EventGPUXID: true}
	for _, n := range slices.Concat(Metrics, Keys) {
		names[n] = true
	}
	root := filepath.Join("..", "..", "..")
	for _, r := range readers {
		assert.Empty(t, spelled(t, root, r, names), "%s spells these names of the gpu receiver: use package gpunames", r)
	}
}

// TestSpelledFindsLiterals: the scan finds a name spelled by hand, and not a struct tag or a
// log field's key.
func TestSpelledFindsLiterals(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "reader")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.go"), []byte(`package reader

type x struct {
	UUID string `+"`json:\"uuid\"`"+`
}

var _ = zap.String("uuid", "")

const metric = "gpu_utilization"
`), 0o600))
	found := spelled(t, root, "reader", map[string]bool{KeyUUID: true, GPUUtilization: true})
	require.Len(t, found, 1)
	assert.Contains(t, found[0], `r.go:9:16: "gpu_utilization"`)
}
