// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
)

// NVML calls newer than old drivers. Each is looked up in the loaded library after Init: on a
// driver without it the reading is left out (or an older call used) instead of the process dying
// on an undefined symbol, which is what calling it would do.
const (
	symClocksEventReasons = "nvmlDeviceGetCurrentClocksEventReasons" // R535
	symMemoryInfoV2       = "nvmlDeviceGetMemoryInfo_v2"             // R510
	symRemappedRows       = "nvmlDeviceGetRemappedRows"              // R450
	symTotalEnergy        = "nvmlDeviceGetTotalEnergyConsumption"    // R418
	symMigMode            = "nvmlDeviceGetMigMode"                   // R450
	symGPM                = "nvmlGpmQueryDeviceSupport"              // R520
	symGPMMig             = "nvmlGpmMigSampleGet"                    // after GPM itself
	symFabricInfo         = "nvmlDeviceGetGpuFabricInfo"             // R525, no health mask
	symFabricInfoV4       = "nvmlDeviceGetGpuFabricInfo_v4"          // newest drivers, with the health mask
)

var optionalSymbols = []string{symClocksEventReasons, symMemoryInfoV2, symRemappedRows, symTotalEnergy, symMigMode, symGPM, symGPMMig, symFabricInfo, symFabricInfoV4}

// nvmlLibrary is the NVML library and its lifecycle: Init, the optional symbols the loaded
// driver has, who holds the library, and Shutdown after the last of them lets go. Its own calls
// (Init, the driver version, the device count, the event set, freeing GPM buffers, Shutdown) run
// on its lane under the backend's guard.
type nvmlLibrary struct {
	nvml.Interface
	// release frees what the library holds (the simulation's blocked calls and event wait).
	release func()
	// path is library_path, "" for the system's.
	path   string
	guard  *deadline.Guard
	lane   deadline.Lane
	logger *zap.Logger
	// onLate is the backend's.
	onLate func(LateCall)

	// ready is set once Init succeeded; driver and symbols are written before it and read-only
	// after.
	ready   atomic.Bool
	driver  string
	symbols map[string]bool
	// holds counts who still uses the library after Init: the backend until its shutdown, the
	// event watcher until its wait returns, each GPM sample buffer until it is freed. The last to
	// let go shuts NVML down, so neither the event set nor a sample buffer is freed, nor the
	// library shut down, under a call that still runs.
	holds atomic.Int32
}

// init calls Init and, once it succeeded, looks up the optional symbols and the driver version
// and holds the library for the backend. It returns the symbols the driver lacks. The first
// failure is a warning, the retries' are debug.
func (l *nvmlLibrary) init(first bool, retry InitRetryConfig) (missing []string, ok bool) {
	if ret := l.call("Init", l.Init); ret != nvml.SUCCESS {
		if first {
			l.logger.Warn("NVML is not available: GPU metrics are off (gpu_nvml_up 0) and Init is retried with backoff; everything else keeps running",
				zap.String("library", l.name()), zap.String("error", ret.Error()),
				zap.Duration("first_retry", retry.InitialInterval), zap.Duration("max_interval", retry.MaxInterval))
		} else {
			l.logger.Debug("NVML Init failed again", zap.String("error", ret.Error()))
		}
		return nil, false
	}
	l.symbols = map[string]bool{}
	for _, sym := range optionalSymbols {
		if l.Extensions().LookupSymbol(sym) == nil {
			l.symbols[sym] = true
		} else {
			missing = append(missing, sym)
		}
	}
	l.driver, _ = callLibrary(l, "SystemGetDriverVersion", l.SystemGetDriverVersion)
	l.holds.Store(1)
	l.ready.Store(true)
	return missing, true
}

func (l *nvmlLibrary) name() string {
	if l.path != "" {
		return l.path
	}
	return "libnvidia-ml.so.1"
}

// has is whether the loaded driver has the optional symbol sym.
func (l *nvmlLibrary) has(sym string) bool { return l.symbols[sym] }

// hold adds a user of the library, who lets go with letGo.
func (l *nvmlLibrary) hold() { l.holds.Add(1) }

// letGo drops one hold on the library and shuts NVML down after the last.
func (l *nvmlLibrary) letGo() {
	if l.holds.Add(-1) > 0 {
		return
	}
	if ret := l.call("Shutdown", l.Shutdown); ret != nvml.SUCCESS {
		l.logger.Debug("NVML Shutdown failed", zap.String("error", ret.Error()))
	}
}

// freeSample frees a GPM sample buffer no one holds and drops the buffer's hold on the library.
// It runs on the library's lane: a buffer may be freed outside any collection (at shutdown, by a
// late call's goroutine) and is the library's, not a GPU's.
func (l *nvmlLibrary) freeSample(smp nvml.GpmSample) {
	if ret := l.call("GpmSampleFree", smp.Free); ret != nvml.SUCCESS {
		l.logger.Debug("NVML GPM sample free failed", zap.String("error", ret.Error()))
	}
	l.letGo()
}

// call is callLibrary for a call that returns only its status.
func (l *nvmlLibrary) call(name string, f func() nvml.Return) nvml.Return {
	_, ret := callLibrary(l, name, func() (struct{}, nvml.Return) { return struct{}{}, f() })
	return ret
}
