#!/usr/bin/env bash
# Finds the Linux capabilities the agent needs by trying: runs bin/otelcol-gpu (distro/local.yaml,
# this machine's / as the host) as root with only a given set of capabilities in its bounding
# set, as Kubernetes' securityContext.capabilities leaves a root container, next to a fake
# Kubernetes container (a cgroup under kubepods with a process carrying PAI_* variables) and the
# kernel log, and prints, for each set, the series that differ from the run with every
# capability, the collector's read errors and its permission errors. Needs root, cgroup v1 or
# v2 writable, Debian's util-linux (setpriv). Used to choose deploy/base/agent.yaml's list.
#   deploy/try-capabilities.sh [capability-set ...]   e.g. "" dac_read_search "dac_read_search,sys_ptrace"
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/otelcol-gpu
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(all "" dac_read_search sys_ptrace syslog "dac_read_search,sys_ptrace" "dac_read_search,sys_ptrace,syslog")
work="$(mktemp -d)"
pod=pod0e0e0e0e-1111-2222-3333-444444444444
cid=$(printf 'c%.0s' {1..64})
cgroups=()
cleanup() {
	[[ -n "${sleeper:-}" ]] && kill "$sleeper" 2>/dev/null && wait "$sleeper" 2>/dev/null
	for ((i = ${#cgroups[@]} - 1; i >= 0; i--)); do rmdir "${cgroups[i]}" 2>/dev/null || true; done
	[[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

# The fake container: a process with a task's environment, in cgroups where the kubelet puts a
# BestEffort pod's containerd container.
env PAI_JOB_NAME=captrial PAI_USER_NAME=alice sleep 600 &
sleeper=$!
if [[ -d /sys/fs/cgroup/memory ]]; then
	for c in memory cpu,cpuacct cpuacct cpu blkio pids; do
		[[ -d /sys/fs/cgroup/$c ]] || continue
		for d in kubepods kubepods/besteffort "kubepods/besteffort/$pod" "kubepods/besteffort/$pod/$cid"; do
			[[ -d /sys/fs/cgroup/$c/$d ]] || { mkdir "/sys/fs/cgroup/$c/$d"; cgroups+=("/sys/fs/cgroup/$c/$d"); }
		done
		echo "$sleeper" >"/sys/fs/cgroup/$c/kubepods/besteffort/$pod/$cid/cgroup.procs"
	done
else
	for d in kubepods.slice kubepods.slice/kubepods-besteffort.slice "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-${pod//-/_}.slice" "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-${pod//-/_}.slice/cri-containerd-$cid.scope"; do
		[[ -d /sys/fs/cgroup/$d ]] || { mkdir "/sys/fs/cgroup/$d"; cgroups+=("/sys/fs/cgroup/$d"); }
	done
	echo "$sleeper" >"/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-${pod//-/_}.slice/cri-containerd-$cid.scope/cgroup.procs"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() { # run NAME CAPS: the collector's page (series names and labels) and its log
	local name=$1 caps=$2 port health bound=()
	port=$(free_port) health=$(free_port)
	[[ "$caps" == all ]] || bound=(setpriv --bounding-set="-all${caps:+,+${caps//,/,+}}" --inh-caps=-all --no-new-privs --)
	"${bound[@]}" "$bin" --config distro/local.yaml --set receivers::task::collection_interval=1s \
		--set "exporters::prometheus_page::endpoint=127.0.0.1:$port" --set "extensions::health_check::endpoint=127.0.0.1:$health" \
		>"$work/$name.log" 2>&1 &
	local pid=$!
	sleep 6
	curl -sf "127.0.0.1:$port/metrics" | grep -v '^#' | sed 's/ [^ ]*$//' | sort >"$work/$name.page" || true
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

run all all
for caps in "${sets[@]}"; do
	[[ "$caps" == all ]] && continue
	name="caps-${caps:-none}"
	run "$name" "$caps"
	echo "=== capabilities: ${caps:-none}"
	echo "series missing compared with every capability (name{labels}):"
	comm -23 <(sed 's/{.*//' "$work/all.page" | sort -u) <(sed 's/{.*//' "$work/$name.page" | sort -u) | sed 's/^/  /'
	grep -q 'job_name="captrial"' "$work/$name.page" && echo "  the fake container's task labels: read" || echo "  the fake container's task labels: NOT read"
	grep '^collector_read_errors_total' "$work/$name.page" | sed 's/^/  /' || true
	grep -i -o 'permission denied[^"]*\|operation not permitted[^"]*' "$work/$name.log" | sort | uniq -c | sed 's/^/  log: /' || true
done
