#!/bin/sh
# Stops the agent before its files go (remove), not on an upgrade (postinst restarts it).
set -e
if [ "$1" = remove ] && [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl disable --now otelcol-gpu-agent.service
fi
