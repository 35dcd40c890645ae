// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command busyhost writes a fake host with many containers for the whole-process benchmark:
//
//	go run ./bench/busyhost -containers 500 -cgroup 2 DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

func main() {
	containers := flag.Int("containers", 500, "job containers (two processes each)")
	version := flag.Int("cgroup", 2, "cgroup version, 1 or 2")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: busyhost [-containers N] [-cgroup 1|2] DIR")
		os.Exit(2)
	}
	if err := hostfixture.Write(flag.Arg(0), hostfixture.Busy(*version, *containers)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
