// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package stack // import "github.com/otelcol-gpu/otelcol-gpu/test/stack"

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Built is a program that a script of test/ builds from the Go module proxy at the version this
// repository pins (Prometheus 3 and its promtool, Thanos, kubectl, Helm): the path in env (the
// Makefile sets it), else the one the script prints when run with args (once built, it only
// prints it; cold, it builds first). Where the binary is cached depends on its version and build
// options, which the script alone decides: the tests do not repeat it.
func Built(tb testing.TB, env, script string, args ...string) string {
	tb.Helper()
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), script), args...).Output()
	if err != nil {
		var stderr []byte
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = exit.Stderr
		}
		tb.Fatalf("%s %s (or set %s): %v\n%s", script, strings.Join(args, " "), env, err, stderr)
	}
	return strings.TrimSpace(string(out))
}
