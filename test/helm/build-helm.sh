#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, cmd/helm) through the Go module proxy, once per version, and
# prints the binary's path, for the tests of deploy/helm (HELM_BIN=$(test/helm/build-helm.sh)).
# `build-helm.sh crds` prints the directory of prometheus-operator's CRDs instead, from its
# module in the Go module cache (downloaded once), so that the tests can install the
# ServiceMonitor, PodMonitor and PrometheusRule kinds in their API server without the CRDs being
# copied into this repository (PROMETHEUS_OPERATOR_CRDS=$(test/helm/build-helm.sh crds)).
#
# Helm's go.mod has no replace directive, so `go install module@version` builds it as released;
# the -X flags are those of Helm's own Makefile: without them the binary calls itself v3.22 and,
# worse, assumes Kubernetes v1.20 in `helm template` and `helm lint` (.Capabilities.KubeVersion,
# a chart's kubeVersion constraint, the deprecation checks) instead of the Kubernetes its
# client-go is built for.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
command="${1:-helm}"
# shellcheck source=test/modules.sh
source "$(dirname "${BASH_SOURCE[0]}")/../modules.sh"
# Outside any module, so that the versions asked for are what go resolves, not this repository's.
cd /
export GOWORK=off GOFLAGS=-mod=mod

case "$command" in
helm) ;;
crds)
	dir="$(module_file Dir "github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}")"
	if [[ ! -f "${dir}/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" ]]; then
		echo "build-helm.sh: no CRDs in prometheus-operator@${PROMETHEUS_OPERATOR_VERSION} (module directory: ${dir:-none})" >&2
		exit 1
	fi
	echo "${dir}/example/prometheus-operator-crd"
	exit 0
	;;
*)
	echo "build-helm.sh: builds helm or finds prometheus-operator's crds, not $command" >&2
	exit 2
	;;
esac

cache_dir="${KUBE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu}/helm-${HELM_VERSION}"
bin="${cache_dir}/helm"
if [[ -x "$bin" ]] && ! plan_only; then
	echo "$bin"
	exit 0
fi

module="helm.sh/helm/v3@${HELM_VERSION}"
# Only what every module proxy must serve is required (the version's go.mod and zip). The commit
# comes from the optional Origin block of the proxy's .info, which a proxy may leave out: without
# it the binary reports no commit, and the build goes on.
gomod="$(module_file GoMod "$module")"
commit="$(module_commit "$module")"
client_go="$(module_requirement "$gomod" k8s.io/client-go)"
# client-go v0.<minor>.<patch> is Kubernetes v1.<minor>, as Helm's Makefile computes it.
kube_minor="$(sed -n 's/^v0\.\([0-9][0-9]*\)\..*/\1/p' <<<"$client_go")"
if [[ -z "$kube_minor" ]]; then
	echo "build-helm.sh: could not read client-go's version in the go.mod of $module (${gomod}: ${client_go:-no requirement of k8s.io/client-go})" >&2
	exit 1
fi
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
if [[ -n "$commit" ]]; then
	ldflags+=" -X helm.sh/helm/v3/internal/version.gitCommit=${commit} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
else
	echo "build-helm.sh: the module proxy sent no commit for $module (no Origin in its .info); helm version will name none" >&2
fi
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${kube_minor}"
done
plan gomod "$gomod"
plan ldflags "$ldflags"
if plan_only; then
	exit 0
fi

# Installed beside the cache's binary and moved into place: an interrupted build leaves none.
work="${cache_dir}/.build"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
CGO_ENABLED=0 GOBIN="$work" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
mv "${work}/helm" "$bin"
echo "$bin"
