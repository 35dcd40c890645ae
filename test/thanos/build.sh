#!/usr/bin/env bash
# Builds Thanos (github.com/thanos-io/thanos, cmd/thanos: one binary, every component a
# subcommand) through the Go module proxy, once per version, and prints the binary's path. The
# tests of the scale-out layout run its Receive and Query (THANOS_BIN=$(test/thanos/build.sh)),
# and so does `make bench`'s scale-out run.
#
# Thanos' go.mod has replace directives (forks and pins of a few dependencies), which
# `go install module@version` refuses. As test/kube/build-apiserver.sh does for Kubernetes, a
# throwaway module requires Thanos and copies those directives, read from the go.mod of the
# version being built so that they cannot drift from it; the rest of the build list is Thanos'
# own (its go.mod lists every dependency, so minimal version selection picks the same versions).
# The tags are those of Thanos' release build (.promu.yml): netgo, and slicelabels, the label
# layout its protobuf conversions assume.
#
# v0.42.0 is the newest release that builds with this repository's Go (1.26.8); v0.42.5 asks for
# Go 1.26.10, which the go command would fetch from the module proxy as a toolchain.
set -euo pipefail

THANOS_VERSION="${THANOS_VERSION:-v0.42.0}"
cache_dir="${THANOS_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu}/thanos-${THANOS_VERSION}"
bin="${cache_dir}/thanos"

if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi

# minutes: a first build, cold, on 2 cores (measured: issue 20's note).
echo "building thanos ${THANOS_VERSION} from the module proxy (once, ~8 min)" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOWORK=off GOFLAGS=-mod=mod

module="github.com/thanos-io/thanos"
go mod init thanos-build >&2
thanos_gomod="$(go mod download -json "${module}@${THANOS_VERSION}" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
if [[ -z "$thanos_gomod" ]]; then
	echo "build.sh: could not download ${module}@${THANOS_VERSION} from the module proxy" >&2
	exit 1
fi
# The replace directives (in a block or alone, comments left out), each "old [version] => new
# version" line a -replace flag of go mod edit. A directive of another form (a local path) would
# not build from the module zip either: it stops the build, naming the count.
directives="$(sed -e 's#//.*##' "$thanos_gomod" | sed -n -e '/^replace (/,/^)/{/=>/p}' -e 's/^replace \(.*=>.*\)/\1/p')"
replaces=()
while read -r flag; do
	replaces+=("-replace=${flag}")
done < <(sed -E -n -e 's/^\s*(\S+) (v\S+) => (\S+) (v\S+)\s*$/\1@\2=\3@\4/p' -e 's/^\s*(\S+) => (\S+) (v\S+)\s*$/\1=\2@\3/p' <<<"$directives")
if [[ ${#replaces[@]} -eq 0 || ${#replaces[@]} -ne $(grep -c '=>' <<<"$directives") ]]; then
	echo "build.sh: read ${#replaces[@]} replace directives of $(grep -c '=>' <<<"$directives") in $thanos_gomod" >&2
	exit 1
fi
go mod edit "-require=${module}@${THANOS_VERSION}" "${replaces[@]}"
go get "${module}/cmd/thanos@${THANOS_VERSION}" >&2

ldflags="-s -w"
for v in "Version=${THANOS_VERSION#v}" "Branch=HEAD" "Revision=${THANOS_VERSION}" "BuildUser=otelcol-gpu"; do
	ldflags+=" -X github.com/prometheus/common/version.${v}"
done
mkdir -p "$cache_dir"
CGO_ENABLED=0 go build -trimpath -tags netgo,slicelabels -ldflags "$ldflags" -o "${bin}.tmp" "${module}/cmd/thanos" >&2
mv "${bin}.tmp" "$bin"
echo "$bin"
