#!/usr/bin/env bash
# Builds the agent's .deb for bare-metal (Slurm) nodes with nfpm (nfpm.yaml) and prints its path:
#   deploy/slurm/build-deb.sh AGENT_BINARY [OUTPUT_DIR]     (`make deb`: bin/)
# nfpm is build-nfpm.sh's (built once per version from the Go module proxy, then cached). The node
# check (cmd/gpucheck) is OTELCOL_GPU_CHECK_BIN (`make deb`: bin/otelcol-gpu-check), else built here.
# The package's version is the agent's (builder-agent.yaml's dist version).
set -euo pipefail

if (($# < 1)); then
	echo "usage: deploy/slurm/build-deb.sh AGENT_BINARY [OUTPUT_DIR]" >&2
	exit 2
fi
# Both relative to where it is run; the rest to the repository.
agent="$(realpath "$1")"
out="$(realpath -m "${2:-bin}")"
check="${OTELCOL_GPU_CHECK_BIN:+$(realpath "$OTELCOL_GPU_CHECK_BIN")}"
cd "$(dirname "$0")/../.."
if [[ -z "$check" ]]; then
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' EXIT
	check="$work/otelcol-gpu-check"
	CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o "$check" ./cmd/gpucheck >&2
fi
nfpm="$(deploy/slurm/build-nfpm.sh)"

version="$(sed -n 's/^  version: *//p' builder-agent.yaml)"
if [[ -z "$version" ]]; then
	echo "build-deb.sh: no dist version in builder-agent.yaml" >&2
	exit 1
fi
mkdir -p "$out"
deb="${out}/otelcol-gpu-agent_${version}_amd64.deb"
OTELCOL_AGENT_BIN="$agent" OTELCOL_GPU_CHECK_BIN="$check" VERSION="$version" "$nfpm" package --config deploy/slurm/nfpm.yaml \
	--packager deb --target "$deb" >&2
echo "$deb"
