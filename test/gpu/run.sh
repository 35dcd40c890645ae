#!/usr/bin/env bash
# make test-gpu: the gpu receiver against nvidia-smi (or dcgmi) on this machine's GPUs, as one
# prepared run: identity, memory, temperatures, power, PCIe, max clocks and power limits, and on
# GPUs with GPM (Hopper and newer) the GPM metrics over one interval against `nvidia-smi dmon
# --gpm-metrics` (or `dcgmi dmon`). Idle first; then, where DCGM's load generator is installed,
# again under tensor load, so that the comparison covers values far from 0. Idle, the node check
# (cmd/gpucheck) also runs on the real GPUs: the GPUs nvidia-smi lists, all healthy. The tests
# skip, and say so, without a driver, without GPM or without the reference tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}
LOAD_SECONDS=${LOAD_SECONDS:-90}

compare() {
	"$GO" test -tags gpu -count=1 -v -timeout 5m -run 'TestAgainstNvidiaSMI|TestGPMAgainstNvidiaSMI' ./receiver/gpureceiver/
}

nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
echo "== idle"
compare
echo "== the node check (otelcol-gpu-check)"
"$GO" test -tags gpu -count=1 -v -timeout 5m -run 'TestCheckThisNode' ./cmd/gpucheck/

tester=$(command -v dcgmproftester12 || command -v dcgmproftester11 || true)
if [ -z "$tester" ]; then
	echo "== no dcgmproftester on PATH: compared idle only"
	exit 0
fi
# 1004 is DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: tensor work on every GPU for LOAD_SECONDS.
echo "== under load: $tester -t 1004 for ${LOAD_SECONDS}s"
"$tester" --no-dcgm-validation -t 1004 -d "$LOAD_SECONDS" >"${TMPDIR:-/tmp}/dcgmproftester.log" 2>&1 &
load=$!
trap 'kill "$load" 2>/dev/null || true' EXIT
sleep 15 # the load generator starts its kernels
compare
