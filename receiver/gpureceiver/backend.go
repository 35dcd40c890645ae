// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"os"
	"path/filepath"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu"
	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// backend is where a node's GPU readings come from: NVML (nvml*.go; the simulated backend is
// NVML over the simulation's mock library), or the amdgpu driver's files (amdgpu.go). The
// scraper (scraper.go) calls it and knows readings, not vendors: each collection it discovers
// the devices, reads each in parallel into the device's own MetricsBuilder, then finishes.
// Collections never overlap. README.md's "Backends" walks through adding one.
type backend interface {
	// start begins the backend's own work (setup retried in the background, event sources);
	// events gets its event log records (XIDs), and is nil without a logs pipeline.
	start(events func(plog.Logs))
	// discover lists the node's devices, in minor number order, and records into node what the
	// listing says of the node (gpu_devices_detected, ...). A device known before is the same
	// handle (it keeps its series); one no longer listed is left out or reported down.
	discover(node *metadata.MetricsBuilder, now pcommon.Timestamp) []device
	// read records one device's readings into mb, each call under call_timeout on the device's
	// own lane, so a device that hangs takes only itself down; devices are read in parallel. It
	// returns what the device's resource is labeled with.
	read(d device, mb *metadata.MetricsBuilder, now pcommon.Timestamp) deviceID
	// finish records into node what the reads counted (collector_read_errors_total, ...).
	finish(node *metadata.MetricsBuilder, now pcommon.Timestamp)
	// latency is the histogram of the backend's calls, call_timeout passes included.
	latency() *latency.Histogram
	// shutdown stops the backend's work and lets go of what it holds.
	shutdown()
}

// device is a backend's handle on one device: a pointer the backend keeps while it knows the
// device, so that the scraper can keep the device's MetricsBuilder with it.
type device any

// deviceID is what a device's resource is labeled with: minor_number and uuid.
type deviceID struct {
	index int
	uuid  string
}

// resolveBackend is the backend the receiver runs: auto is amdgpu on a node with the KFD and an
// amdgpu card and no NVIDIA driver (/proc/driver/nvidia), else nvml. A node with both vendors
// runs nvml (one backend per receiver).
func resolveBackend(cfg *Config) Backend {
	if cfg.Backend != BackendAuto {
		return cfg.Backend
	}
	if _, err := os.Stat(filepath.Join(cfg.RootPath, "proc", "driver", "nvidia")); err == nil {
		return BackendNVML
	}
	if (amdgpu.Reader{Root: cfg.RootPath}).Present() {
		return BackendAMDGPU
	}
	return BackendNVML
}

// newBackend makes the backend kind names (resolved, never auto).
func newBackend(ss scraperSettings, kind Backend) (backend, error) {
	if kind == BackendAMDGPU {
		return newAMDBackend(ss), nil
	}
	lib, release, err := openLibrary(ss.cfg)
	if err != nil {
		return nil, err
	}
	return newNVMLBackend(ss, lib, release), nil
}
