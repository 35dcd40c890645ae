#!/usr/bin/env bash
# Runs commands in a fresh Debian 12 root holding only what the README asks of a new machine (Go,
# gcc, git, make) and a clean clone of this repository's HEAD: the check that `make test` and
# `make run` need nothing before them. Needs root, debootstrap and the Debian mirror.
#
# Usage: test/fresh-debian.sh [-u] 'command' ...
#   each command runs in the clone with bash, as root, or with -u before it as a user "tester"
#   (who owns the clone's copy in its home); the root is removed afterwards, with whatever was
#   mounted into it, however the commands ended. The Debian base (debootstrap, ~2 minutes) is
#   kept in FRESH_DIR (default /var/tmp/otelcol-fresh) and copied for each run.
#
# The host's Go toolchain, DNS, local CA certificates and Debian sources go in, so that the root
# reaches the module proxy and the mirror as the host does; its Go caches and settings do not.
set -euo pipefail

if ((EUID != 0)); then
	echo "test/fresh-debian.sh: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
fresh="${FRESH_DIR:-/var/tmp/otelcol-fresh}"
goroot="$(go env GOROOT)"

if [[ ! -d "$fresh/base" ]]; then
	mkdir -p "$fresh"
	debootstrap --variant=minbase --include=gcc,libc6-dev,git,make,ca-certificates \
		bookworm "$fresh/base.tmp" http://deb.debian.org/debian >&2
	mv "$fresh/base.tmp" "$fresh/base"
fi

root="$(mktemp -d "$fresh/root.XXXXXX")"
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	# Whatever a run left running in the root, then every mount in it, deepest first (lazily:
	# one that is still busy goes when it is free), then the files, never through a mount.
	local pid
	for pid in /proc/[0-9]*; do
		if [[ "$(readlink "$pid/root" 2>/dev/null)/" == "$root/"* ]]; then
			kill -9 "${pid#/proc/}" 2>/dev/null || true
		fi
	done
	awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r umount -l
	rm -rf --one-file-system "$root"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

cp -a "$fresh/base/." "$root"
mkdir -p "$root$goroot"
cp -a "$goroot/." "$root$goroot"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
chroot "$root" update-ca-certificates >/dev/null
rm -f "$root/etc/apt/sources.list"
cp -r /etc/apt/sources.list.d/. "$root/etc/apt/sources.list.d/"
[[ ! -e /etc/apt/sources.list ]] || cp /etc/apt/sources.list "$root/etc/apt/sources.list"
chroot "$root" useradd --create-home tester
git clone --quiet --no-hardlinks "$repo" "$root/root/otelcol-gpu"
git -C "$root/root/otelcol-gpu" checkout --quiet --detach "$(git -C "$repo" rev-parse HEAD)"
cp -a "$root/root/otelcol-gpu" "$root/home/tester/otelcol-gpu"
chroot "$root" chown -R tester: /home/tester/otelcol-gpu

# The root is a mount point, as a machine's or a container's is (`unshare --mount` changes its
# propagation, which fails on a plain directory), with the kernel's file systems in it. rslave:
# an unmount in here never reaches the host's.
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
for fs in sys dev; do
	mount --rbind "/$fs" "$root/$fs"
	mount --make-rslave "$root/$fs"
done

env=(PATH="$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" LANG=C.UTF-8)
for var in GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOINSECURE; do
	env+=("$var=$(go env "$var")")
done
for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[[ -z "${!var:-}" ]] || env+=("$var=${!var}")
done

status=0
user=root
for arg in "$@"; do
	if [[ "$arg" == -u ]]; then
		user=tester
		continue
	fi
	home="$(chroot "$root" getent passwd "$user" | cut -d: -f6)"
	echo "fresh-debian: $user\$ $arg" >&2
	rc=0
	chroot "$root" runuser -u "$user" -- env -i "${env[@]}" HOME="$home" USER="$user" \
		bash -c "cd ~/otelcol-gpu && $arg" || rc=$?
	echo "fresh-debian: exit status $rc" >&2
	((rc == 0)) || status=$rc
	user=root
done
exit "$status"
