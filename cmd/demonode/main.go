// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command demonode runs a command (the collector) beside the Kubernetes node of `make demo`:
//
//	demonode [-scenario FILE] [-pods FILE | -slurm FILE] [-tick D] -- bin/otelcol-gpu --config distro/demo.yaml
//
// It writes the node (internal/demonode: a /proc + cgroup tree with the demo jobs' processes,
// the kubelet's log layout, a pod-resources gRPC server on a unix socket) into a temporary
// directory, runs the command with OTELCOL_GPU_DEMO_ROOT naming it, passes SIGINT and SIGTERM
// on, and removes the node when the command exits. The scenario (internal/gpuscenario) names
// the GPUs and their identities: an NVIDIA scenario's, which the gpu receiver's simulated
// backend plays; an AMD scenario's (profile mi300x), whose amdgpu and KFD files demonode writes
// into the node too (internal/amdgpu/amdgpufixture) and rewrites every tick as the scenario's
// time passes, for the gpu receiver's amdgpu backend to read. With -slurm the node is a Slurm
// node instead (`make demo-slurm`): the jobs file's steps in Slurm's cgroup v1 tree, their
// processes with slurmstepd's environment, and no kubelet.
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
	slurmFile := flag.String("slurm", "", "Slurm jobs file: lay out a Slurm node running them instead of the pods")
	tick := flag.Duration("tick", time.Second, "how often an AMD scenario's files are rewritten")
	flag.Parse()
	if flag.NArg() == 0 || (*podsFile != "" && *slurmFile != "") {
		fmt.Fprintln(os.Stderr, "usage: demonode [-scenario FILE] [-pods FILE | -slurm FILE] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	node := nodeFiles{slurm: *slurmFile, pods: *podsFile}
	if node.pods == "" && node.slurm == "" {
		node.pods = filepath.Join(filepath.Dir(*scenario), "pods", filepath.Base(*scenario))
	}
	code, err := run(*scenario, node, *tick, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "demonode:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// nodeFiles name what runs on the node: a pods file (a Kubernetes node) or a Slurm jobs file.
type nodeFiles struct{ pods, slurm string }

func run(scenario string, files nodeFiles, tick time.Duration, command []string) (int, error) {
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
	nodeRoot := filepath.Join(root, "node")
	if files.slurm != "" {
		err = startSlurm(nodeRoot, files.slurm, gpus)
	} else {
		var stop func()
		stop, err = startKubernetes(nodeRoot, files.pods, gpus)
		if stop != nil {
			defer stop()
		}
	}
	if err != nil {
		return 1, err
	}
	if amd != nil {
		stop, startErr := amd.Start(nodeRoot, tick)
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
	cmd.Env = append(os.Environ(), "OTELCOL_GPU_DEMO_ROOT="+nodeRoot)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	err = cmd.Start()
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "demonode: the demo node is at %s\n", nodeRoot)
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

// startKubernetes lays out the pods file's node and serves its kubelet until stop.
func startKubernetes(root, podsFile string, gpus map[int]demonode.GPU) (stop func(), err error) {
	pods, err := demonode.LoadPods(podsFile)
	if err != nil {
		return nil, err
	}
	node, err := demonode.Start(root, pods, gpus)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "demonode: its kubelet serves pod-resources on %s\n", demonode.Socket(root))
	return node.Close, nil
}

// startSlurm lays out the Slurm jobs file's node.
func startSlurm(root, jobsFile string, gpus map[int]demonode.GPU) error {
	jobs, err := demonode.LoadSlurmJobs(jobsFile)
	if err != nil {
		return err
	}
	return demonode.StartSlurm(root, jobs, gpus)
}
