#!/usr/bin/env bash
# Builds kube-apiserver from k8s.io/kubernetes through the Go module proxy, once per version,
# and prints the binary's path. The end-to-end tests of the k8s_watchdog receiver run it
# (KUBE_APISERVER_BIN=$(test/kube/build-apiserver.sh) go test -tags e2e ./...).
# `build-apiserver.sh kubectl` builds kubectl of the same version the same way, for the tests of
# deploy/ (Debian's kubernetes-client is far older than the API server); kubelet,
# kube-controller-manager, kube-scheduler and kube-proxy likewise, for the real node of
# test/realnode. They are static (CGO_ENABLED=0): the kubelet runs fine without cgo.
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod points every staging
# repository (k8s.io/api, k8s.io/client-go, ...) at ./staging/src/..., which does not exist in
# the module zip. A throwaway module therefore requires it and replaces each of those staging
# paths by the published module of the matching version (v1.34.4 -> v0.34.4). The list is read
# from kubernetes' own go.mod so that it cannot drift from the version being built.
set -euo pipefail
# shellcheck source=test/modules.sh
source "$(dirname "${BASH_SOURCE[0]}")/../modules.sh"

KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
command="${1:-kube-apiserver}"
# minutes: how long a first build takes, cold, on 2 cores (what the message below announces).
case "$command" in
kube-apiserver) minutes=10 ;;
kubectl) minutes=3 ;;
kubelet) minutes=7 ;;
kube-controller-manager) minutes=4 ;;
kube-scheduler | kube-proxy) minutes=2 ;;
*)
	echo "build-apiserver.sh: builds kube-apiserver, kubectl, kubelet, kube-controller-manager, kube-scheduler or kube-proxy, not $command" >&2
	exit 2
	;;
esac
cache_dir="${KUBE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/otelcol-gpu}/${command}-${KUBE_VERSION}"
bin="${cache_dir}/${command}"

if [[ -x "$bin" ]] && ! plan_only; then
	echo "$bin"
	exit 0
fi

plan_only || echo "building ${command} ${KUBE_VERSION} from the module proxy (once, ~${minutes} min)" >&2

# Staging modules are tagged v0.<minor>.<patch> for kubernetes v1.<minor>.<patch>.
staging_version="v0.${KUBE_VERSION#v1.}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOWORK=off GOFLAGS=-mod=mod

go mod init kube-apiserver-build >&2
kube_gomod="$(module_file GoMod "k8s.io/kubernetes@${KUBE_VERSION}")"
replaces=()
while IFS='=' read -r path target; do
	if [[ "$target" == ./staging/src/* ]]; then
		replaces+=("-replace=${path}=${path}@${staging_version}")
	fi
done < <(module_replacements "$kube_gomod")
if [[ ${#replaces[@]} -eq 0 ]]; then
	echo "build-apiserver.sh: found no replace directive to ./staging/src in $kube_gomod" >&2
	exit 1
fi
go mod edit "-require=k8s.io/kubernetes@${KUBE_VERSION}" "${replaces[@]}"

# The version variables are what kubernetes' own build (hack/lib/version.sh) sets; without them
# the binary reports v0.0.0 and clients that check the server version get confused.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")"
done
plan gomod "$kube_gomod"
plan_replacements go.mod
plan ldflags "$ldflags"
if plan_only; then
	exit 0
fi
go get "k8s.io/kubernetes/cmd/${command}@${KUBE_VERSION}" >&2
mkdir -p "$cache_dir"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "${bin}.tmp" "k8s.io/kubernetes/cmd/${command}" >&2
mv "${bin}.tmp" "$bin"
echo "$bin"
