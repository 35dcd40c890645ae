// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpucheck (installed as otelcol-gpu-check) checks a GPU node once, with the gpu
// receiver's readings and the k8s_gpu_health connector's judgement, and exits 0 when it is
// healthy, 1 when it is not (naming each GPU and the action it calls for) and 2 when it could
// not check. The reads run in a child process (this binary again) that the parent abandons and
// kills at -timeout: a call into the GPU driver cannot be cancelled, so a hung one must not hold
// the check. docs/check.md has the checks, the JSON schema and examples.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// readerArg, as the only argument, makes the process the child that reads the node: its
// options come as JSON on stdin, its lines (lateLine, then a report) go to stdout.
const readerArg = "__read-node"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command; it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == readerArg {
		return readNode(stdin, stdout, stderr)
	}
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, errHelp) {
		return exitHealthy
	}
	if err != nil {
		fmt.Fprintf(stderr, "otelcol-gpu-check: %v\n", err)
		return exitCouldNotCheck
	}
	rep := check(opts, stderr)
	if err := rep.write(stdout, opts.Output); err != nil {
		fmt.Fprintf(stderr, "otelcol-gpu-check: %v\n", err)
		return exitCouldNotCheck
	}
	return rep.ExitCode
}
