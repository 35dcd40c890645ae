#!/usr/bin/env bash
# Builds the agent's .deb for bare-metal (Slurm) nodes with nfpm (nfpm.yaml) and prints its path:
#   deploy/slurm/build-deb.sh AGENT_BINARY [OUTPUT_DIR]     (`make deb`: bin/)
# nfpm (github.com/goreleaser/nfpm/v2) is built from the Go module proxy once per version and kept
# in the cache (~/.cache/otelcol-gpu/nfpm-<version>), as test/prometheus/build.sh keeps Prometheus.
# The package's version is the agent's (builder-agent.yaml's dist version).
set -euo pipefail
cd "$(dirname "$0")/../.."

if (($# < 1)); then
	echo "usage: deploy/slurm/build-deb.sh AGENT_BINARY [OUTPUT_DIR]" >&2
	exit 2
fi
agent="$(realpath "$1")"
out="${2:-bin}"
NFPM_VERSION="${NFPM_VERSION:-v2.48.0}"
cache_dir="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu/nfpm-${NFPM_VERSION#v}"
nfpm="${cache_dir}/nfpm"
if [[ ! -x "$nfpm" ]]; then
	work="$(mktemp -d)"
	trap 'rm -rf "$work"' EXIT
	echo "building nfpm ${NFPM_VERSION} from the module proxy (once, ~3 min)" >&2
	GOWORK=off GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
		"github.com/goreleaser/nfpm/v2/cmd/nfpm@${NFPM_VERSION}" >&2
	mkdir -p "$cache_dir"
	mv "$work/nfpm" "$nfpm"
fi

version="$(sed -n 's/^  version: *//p' builder-agent.yaml)"
if [[ -z "$version" ]]; then
	echo "build-deb.sh: no dist version in builder-agent.yaml" >&2
	exit 1
fi
mkdir -p "$out"
deb="${out}/otelcol-gpu-agent_${version}_amd64.deb"
OTELCOL_AGENT_BIN="$agent" VERSION="$version" "$nfpm" package --config deploy/slurm/nfpm.yaml \
	--packager deb --target "$deb" >&2
echo "$deb"
