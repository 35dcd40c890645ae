#!/usr/bin/env bash
# Makes sure that the programs the tests run beside the code are here, so that `make test` needs
# nothing but Go and gcc before it. Missing Debian packages are installed when run as root;
# otherwise it stops with one line naming them. What Debian lacks (Kubernetes, Prometheus 3,
# Helm, Thanos) is built from the Go module proxy once per version by its script, which keeps it in its
# cache (~/.cache/otelcol-gpu). When everything is here it says nothing and takes well under a second,
# so every target that runs these programs runs it first.
#
# Usage: test/deps.sh [program...]    (no program: all of those below)
set -euo pipefail
cd "$(dirname "$0")/.."

# The programs the tests run, each with where it comes from: a Debian package, or the script
# (and its argument) that builds it. A program is a command on PATH or an absolute path.
declare -A source=(
	# Prometheus 2.42 and promtool (promtool test rules, the report's backfill, and the
	# dashboards' and OpenPAI's queries run once more on 2.x), node_exporter beside the agent,
	# etcd under the test API servers, chromium (the report's page), umoci (the image).
	[promtool]="deb prometheus"
	[prometheus]="deb prometheus"
	[prometheus-node-exporter]="deb prometheus-node-exporter"
	[etcd]="deb etcd-server"
	[chromium]="deb chromium"
	[umoci]="deb umoci"
	# The real node (test/realnode): its container runtime, the CNI bridge, the node's iptables
	# (kube-proxy) and conntrack, and busybox for the test images; gcc builds their pause.
	[containerd]="deb containerd"
	[runc]="deb runc"
	[/usr/lib/cni/bridge]="deb containernetworking-plugins"
	[iptables]="deb iptables"
	[conntrack]="deb conntrack"
	[/bin/busybox]="deb busybox-static"
	# The real Slurm (test/realslurm): its controller, node daemon, client commands and munge.
	[slurmctld]="deb slurmctld"
	[slurmd]="deb slurmd"
	[sbatch]="deb slurm-client"
	[munged]="deb munge"
	# Built: Debian has no kube-apiserver, its kubectl is far older, and its Prometheus is 2.x
	# (Prometheus 3 is the server of the e2e tests, the report's tests and the real node); Helm is
	# not packaged.
	[kube-apiserver]="build test/kube/build-apiserver.sh kube-apiserver"
	[kubectl]="build test/kube/build-apiserver.sh kubectl"
	[kubelet]="build test/kube/build-apiserver.sh kubelet"
	[kube-controller-manager]="build test/kube/build-apiserver.sh kube-controller-manager"
	[kube-scheduler]="build test/kube/build-apiserver.sh kube-scheduler"
	[kube-proxy]="build test/kube/build-apiserver.sh kube-proxy"
	[prometheus3]="build test/prometheus/build.sh prometheus"
	[helm]="build test/helm/build-helm.sh helm"
	# Thanos (Receive, Query) under the scale-out layout's tests and `make bench`'s scale-out run.
	[thanos]="build test/thanos/build.sh"
	[prometheus-operator-crds]="build test/helm/build-helm.sh crds"
	# nfpm, the packager of the agent's .deb (deploy/slurm; test/e2e's TestSlurmDeb).
	[nfpm]="build deploy/slurm/build-nfpm.sh"
)

programs=("$@")
if ((${#programs[@]} == 0)); then
	programs=("${!source[@]}")
fi

packages=() # the missing ones, each once
needed_by=()
builds=()
for program in "${programs[@]}"; do
	read -r kind what <<<"${source[$program]:-}"
	case "$kind" in
	deb)
		if ! command -v "$program" >/dev/null; then
			[[ " ${packages[*]} " == *" $what "* ]] || packages+=("$what")
			needed_by+=("$program")
		fi
		;;
	build) builds+=("$what") ;;
	*)
		echo "test/deps.sh: no such program in its list: $program" >&2
		exit 2
		;;
	esac
done

# Two chains of builds run side by side, each in order: while one waits on the module proxy the
# other compiles, which shortens a cold run's wait; within a chain, a build reuses the packages the
# one before it compiled (the Kubernetes binaries and Helm share client-go and apimachinery;
# Thanos imports Prometheus). The Debian packages install beside them.
chain_of() {
	case "$1" in
	test/prometheus/* | test/thanos/*) echo 1 ;;
	*) echo 0 ;;
	esac
}
chains=("" "")
for build in "${builds[@]}"; do
	chain="$(chain_of "$build")"
	chains[chain]+="${build};"
done

# run_chain runs the builds of one chain in order, stopping at the first that fails. Each script
# prints its binary's path, says what it builds when it must, and is silent when its cache has it.
run_chain() {
	local build
	while IFS= read -r -d ';' build; do
		# shellcheck disable=SC2086 # a script and its argument
		$build >/dev/null || return 1
	done <<<"$1"
}

install_packages() {
	echo "installing Debian packages ${packages[*]} (the tests run ${needed_by[*]})" >&2
	# Quiet but for errors: dpkg's hundreds of lines per package would bury the tests' output.
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq update
	apt-get -qq install -y --no-install-recommends "${packages[@]}" >/dev/null
}

if ((${#packages[@]} > 0)) && ((EUID != 0)); then
	echo "missing Debian packages: ${packages[*]}; run: sudo apt-get install -y --no-install-recommends ${packages[*]}" >&2
	exit 1
fi

pids=()
# The modules of this repository and of its tools (golangci-lint, the collector builder), which
# lint, the builds and the tests fetch anyway: fetched beside the builds, a cold run's downloads
# wait on the network while the builds compile. Milliseconds when they are in the module cache.
(for module in . tools tools/lint; do (cd "$module" && go mod download) || exit 1; done) &
pids+=($!)
if ((${#packages[@]} > 0)); then
	install_packages &
	pids+=($!)
fi
for chain in "${chains[@]}"; do
	if [[ -n "$chain" ]]; then
		run_chain "$chain" &
		pids+=($!)
	fi
done
failed=0
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
# Each failing script said why on stderr.
exit "$failed"
