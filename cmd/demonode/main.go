// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command demonode runs a command (the collector) beside the Kubernetes node of `make demo`:
//
//	demonode [-scenario FILE] [-pods FILE] [-tick D] -- bin/otelcol-gpu --config distro/demo.yaml
//
// It writes the node (internal/demonode: a /proc + cgroup tree with the demo jobs' processes,
// the kubelet's log layout, a pod-resources gRPC server on a unix socket) into a temporary
// directory, runs the command with OTELCOL_GPU_DEMO_ROOT naming it, passes SIGINT and SIGTERM
// on, and removes the node when the command exits. The scenario (internal/gpuscenario) names
// the GPUs and their identities: an NVIDIA scenario's, which the gpu receiver's simulated
// backend plays; an AMD scenario's (profile mi300x), whose amdgpu and KFD files demonode writes
// into the node too (internal/amdgpu/amdgpufixture) and rewrites every tick as the scenario's
// time passes, for the gpu receiver's amdgpu backend to read.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

func main() {
	scenario := flag.String("scenario", "distro/scenarios/dgx-a100-demo.yaml", "GPU scenario (internal/gpuscenario's format)")
	podsFile := flag.String("pods", "", "pods file (default: pods/<scenario file name> beside the scenario)")
	tick := flag.Duration("tick", time.Second, "how often an AMD scenario's files are rewritten")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: demonode [-scenario FILE] [-pods FILE] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	if *podsFile == "" {
		*podsFile = filepath.Join(filepath.Dir(*scenario), "pods", filepath.Base(*scenario))
	}
	code, err := run(*scenario, *podsFile, *tick, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "demonode:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(scenario, podsFile string, tick time.Duration, command []string) (int, error) {
	pods, err := demonode.LoadPods(podsFile)
	if err != nil {
		return 1, err
	}
	sc, err := gpuscenario.Load(scenario)
	if err != nil {
		return 1, fmt.Errorf("%s: %w", scenario, err)
	}
	gpus, amd, err := demonode.ScenarioGPUs(sc)
	if err != nil {
		return 1, err
	}
	root, err := os.MkdirTemp("", "otelcol-gpu-demo-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(root)
	node, err := demonode.Start(filepath.Join(root, "node"), pods, gpus)
	if err != nil {
		return 1, err
	}
	defer node.Close()
	if amd != nil {
		stop, startErr := amd.Start(node.Root, tick)
		if startErr != nil {
			return 1, startErr
		}
		defer func() {
			if writeErr := stop(); writeErr != nil {
				fmt.Fprintln(os.Stderr, "demonode: writing the AMD GPUs' files:", writeErr)
			}
		}()
	}

	cmd := exec.Command(command[0], command[1:]...) //nolint:gosec // G204: runs the command on its command line, as it is meant to
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "OTELCOL_GPU_DEMO_ROOT="+node.Root)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	err = cmd.Start()
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "demonode: the demo node is at %s (pod-resources socket %s)\n", node.Root, demonode.Socket(node.Root))
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode(), nil
	}
	return 0, err
}
