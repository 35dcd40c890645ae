#!/bin/sh
# Enables and (re)starts the agent where systemd runs; in a chroot, an image build or under
# dpkg --root (DPKG_ROOT set) the unit is only installed.
set -e
if [ "$1" = configure ] && [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable otelcol-gpu-agent.service
	systemctl restart otelcol-gpu-agent.service
fi
