#!/usr/bin/env bash
# Builds Prometheus 3 from github.com/prometheus/prometheus through the Go module proxy, once per
# version, and prints the binary's path:
#   test/prometheus/build.sh            the server (prometheus)
#   test/prometheus/build.sh promtool   its rule checker
# It is the Prometheus of the tests (`make e2e` and `make realnode` set PROMETHEUS_BIN to it):
# the e2e package, the report's tests, and the shipped scrape jobs (kubernetes_sd_configs) against
# a real API server (test/realnode), which Debian's prometheus (2.42) could not run. Debian's 2.42
# stays for promtool and for the dashboards' and OpenPAI's queries run once more on 2.x.
#
# Prometheus 3.x is published as the Go module v0.3XX.Y (3.16.0 is v0.316.0); its go.mod has no
# replace directives, so `go install module@version` builds it as released. The web UI's assets
# are not in the module (they are built with npm): the server serves its API and no UI.
set -euo pipefail
# shellcheck source=test/modules.sh
source "$(dirname "${BASH_SOURCE[0]}")/../modules.sh"

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
command="${1:-prometheus}"
case "$command" in
prometheus | promtool) ;;
*)
	echo "build.sh: builds prometheus or promtool, not $command" >&2
	exit 2
	;;
esac
# v0.316.0 -> 3.16.0, the version the binary reports.
minor_patch="${PROMETHEUS_VERSION#v0.3}"
release="3.$((10#${minor_patch%%.*})).${minor_patch#*.}"
# Service discovery: the file, HTTP and Kubernetes ones only (Prometheus' own build tags), which
# leaves out the cloud SDKs, most of a cold build's time. The cache is keyed by this choice too.
tags="remove_all_sd,enable_kubernetes_sd"
cache_dir="${PROMETHEUS_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu}/${command}-${release}-kubernetes-sd"
bin="${cache_dir}/${command}"

if [[ -x "$bin" ]] && ! plan_only; then
	echo "$bin"
	exit 0
fi

ldflags="-s -w"
for v in "Version=${release}" "Branch=HEAD" "Revision=${PROMETHEUS_VERSION}" "BuildUser=otelcol-gpu"; do
	ldflags+=" -X github.com/prometheus/common/version.${v}"
done
plan tags "$tags"
plan ldflags "$ldflags"
if plan_only; then
	exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building ${command} ${release} from the module proxy (once, ~5 min)" >&2
GOWORK=off GOBIN="$work" CGO_ENABLED=0 go install -trimpath -tags "$tags" -ldflags "$ldflags" \
	"github.com/prometheus/prometheus/cmd/${command}@${PROMETHEUS_VERSION}" >&2
mkdir -p "$cache_dir"
mv "$work/$command" "$bin"
echo "$bin"
