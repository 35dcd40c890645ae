#!/usr/bin/env bash
# Makes sure that the programs the tests run beside the code are here, so that `make test` needs
# nothing but Go and gcc before it. Missing Debian packages are installed when run as root;
# otherwise it stops with one line naming them. kube-apiserver and kubectl are built from the Go
# module proxy, once per version (test/kube/build-apiserver.sh keeps them in its cache). When
# everything is here it says nothing and takes milliseconds, so every target that runs these
# programs runs it first.
#
# Usage: test/deps.sh [program...]    (no program: all of those below)
set -euo pipefail
cd "$(dirname "$0")/.."

# The programs the tests run, each with the Debian package that ships it, or "build" for those
# build-apiserver.sh builds: Debian has no kube-apiserver, and its kubectl is far older.
declare -A source=(
	[promtool]=prometheus
	[prometheus]=prometheus
	[prometheus-node-exporter]=prometheus-node-exporter
	[etcd]=etcd-server
	[chromium]=chromium
	[umoci]=umoci
	[kube-apiserver]=build
	[kubectl]=build
)

programs=("$@")
if ((${#programs[@]} == 0)); then
	programs=("${!source[@]}")
fi

packages=() # the missing ones, each once
needed_by=()
for program in "${programs[@]}"; do
	package="${source[$program]:-}"
	case "$package" in
	"")
		echo "test/deps.sh: no such program in its list: $program" >&2
		exit 2
		;;
	build) ;;
	*)
		if ! command -v "$program" >/dev/null; then
			[[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
			needed_by+=("$program")
		fi
		;;
	esac
done

if ((${#packages[@]} > 0)); then
	if ((EUID != 0)); then
		echo "missing Debian packages: ${packages[*]}; run: sudo apt-get install -y --no-install-recommends ${packages[*]}" >&2
		exit 1
	fi
	echo "installing Debian packages ${packages[*]} (the tests run ${needed_by[*]})" >&2
	# Quiet but for errors: dpkg's hundreds of lines per package would bury the tests' output.
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq update
	apt-get -qq install -y --no-install-recommends "${packages[@]}" >/dev/null
fi

for program in "${programs[@]}"; do
	if [[ "${source[$program]}" == build ]]; then
		test/kube/build-apiserver.sh "$program" >/dev/null
	fi
done
