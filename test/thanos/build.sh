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
# shellcheck source=test/modules.sh
source "$(dirname "${BASH_SOURCE[0]}")/../modules.sh"

THANOS_VERSION="${THANOS_VERSION:-v0.42.0}"
cache_dir="${THANOS_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu}/thanos-${THANOS_VERSION}"
bin="${cache_dir}/thanos"

if [[ -x "$bin" ]] && ! plan_only; then
	echo "$bin"
	exit 0
fi

# minutes: a first build, cold, on 2 cores (measured: issue 20's note).
plan_only || echo "building thanos ${THANOS_VERSION} from the module proxy (once, ~8 min)" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOWORK=off GOFLAGS=-mod=mod

module="github.com/thanos-io/thanos"
go mod init thanos-build >&2
thanos_gomod="$(module_file GoMod "${module}@${THANOS_VERSION}")"
# Each replace directive, copied. One to a directory would not build from the module zip: it stops
# the build, naming it.
replaces=()
while read -r replacement; do
	case "${replacement#*=}" in
	./* | ../* | /*)
		echo "build.sh: ${module}@${THANOS_VERSION} replaces a module by a directory (${replacement}), which its module zip cannot build" >&2
		exit 1
		;;
	esac
	replaces+=("-replace=${replacement}")
done < <(module_replacements "$thanos_gomod")
if [[ ${#replaces[@]} -eq 0 ]]; then
	echo "build.sh: found no replace directive in $thanos_gomod (Thanos' go.mod has had some for years: was it read?)" >&2
	exit 1
fi
go mod edit "-require=${module}@${THANOS_VERSION}" "${replaces[@]}"

ldflags="-s -w"
for v in "Version=${THANOS_VERSION#v}" "Branch=HEAD" "Revision=${THANOS_VERSION}" "BuildUser=otelcol-gpu"; do
	ldflags+=" -X github.com/prometheus/common/version.${v}"
done
plan gomod "$thanos_gomod"
plan_replacements go.mod
plan ldflags "$ldflags"
if plan_only; then
	exit 0
fi
go get "${module}/cmd/thanos@${THANOS_VERSION}" >&2
mkdir -p "$cache_dir"
CGO_ENABLED=0 go build -trimpath -tags netgo,slicelabels -ldflags "$ldflags" -o "${bin}.tmp" "${module}/cmd/thanos" >&2
mv "${bin}.tmp" "$bin"
echo "$bin"
