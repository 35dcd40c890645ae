// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package stack // import "github.com/otelcol-gpu/otelcol-gpu/test/stack"

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// KustomizeSets are the --set flags that a kustomization's JSON patches give a container's
// arguments: each argument a patch adds (path .../args/-), or the list one sets (.../args),
// but --config.
func KustomizeSets(tb testing.TB, kustomization string) []string {
	tb.Helper()
	var k struct {
		Patches []struct {
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	data, err := os.ReadFile(kustomization)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		tb.Fatalf("%s: %v", kustomization, err)
	}
	var args []string
	for _, p := range k.Patches {
		var ops []struct {
			Path  string `yaml:"path"`
			Value any    `yaml:"value"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			tb.Fatalf("%s: %v", kustomization, err)
		}
		for _, op := range ops {
			switch value := op.Value.(type) {
			case string:
				if strings.HasSuffix(op.Path, "/args/-") {
					args = append(args, value)
				}
			case []any:
				if strings.HasSuffix(op.Path, "/args") {
					for _, arg := range value {
						args = append(args, fmt.Sprint(arg))
					}
				}
			}
		}
	}
	var sets []string
	for _, arg := range args {
		if strings.HasPrefix(arg, "--config=") {
			continue
		}
		set, found := strings.CutPrefix(arg, "--set=")
		if !found {
			tb.Fatalf("%s: an argument that is no --set: %s", kustomization, arg)
		}
		sets = append(sets, set)
	}
	if len(sets) == 0 {
		tb.Fatalf("%s adds no --set flag", kustomization)
	}
	return sets
}
