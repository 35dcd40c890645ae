#!/usr/bin/env bash
# Builds nfpm (github.com/goreleaser/nfpm/v2), the packager of the agent's .deb (build-deb.sh),
# from the Go module proxy once per version, keeps it in the cache
# (~/.cache/otelcol-gpu/nfpm-<version>) as test/prometheus/build.sh keeps Prometheus, and prints
# its path. test/deps.sh runs it first, so that a cold `make test` builds it beside the others.
set -euo pipefail

NFPM_VERSION="${NFPM_VERSION:-v2.48.0}"
cache_dir="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu/nfpm-${NFPM_VERSION#v}"
bin="${cache_dir}/nfpm"
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building nfpm ${NFPM_VERSION} from the module proxy (once, ~3 min)" >&2
GOWORK=off GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
	"github.com/goreleaser/nfpm/v2/cmd/nfpm@${NFPM_VERSION}" >&2
mkdir -p "$cache_dir"
mv "$work/nfpm" "$bin"
echo "$bin"
