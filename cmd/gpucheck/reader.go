// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metricpoints"
	"github.com/otelcol-gpu/otelcol-gpu/internal/nodename"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"
)

// readNode is the child: it reads the node once, writing each call that passes its deadline
// as it happens, then the report.
func readNode(stdin io.Reader, stdout, stderr io.Writer) int {
	var opts options
	if err := json.NewDecoder(stdin).Decode(&opts); err != nil {
		fmt.Fprintf(stderr, "otelcol-gpu-check: the reader's options: %v\n", err)
		return exitCouldNotCheck
	}
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	emit := func(l line) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l) // unbuffered: the parent sees each line at once
	}
	r := read(opts, settings(opts.Verbose, stderr), func(c gpureceiver.LateCall) { emit(line{Late: &c}) })
	rep := judge(r)
	emit(line{Report: rep})
	// After the report: letting go of NVML can wait on a hung call, and the parent need not.
	r.close()
	return rep.ExitCode
}

// settings are the components' settings: their log goes to stderr with -v, else nowhere.
func settings(verbose bool, stderr io.Writer) receiver.Settings {
	logger := zap.NewNop()
	if verbose {
		enc := zap.NewDevelopmentEncoderConfig()
		logger = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(stderr), zapcore.DebugLevel))
	}
	return receiver.Settings{
		ID: component.MustNewID("gpu"),
		TelemetrySettings: component.TelemetrySettings{
			Logger: logger, MeterProvider: noopmetric.NewMeterProvider(), TracerProvider: nooptrace.NewTracerProvider(),
		},
		BuildInfo: component.NewDefaultBuildInfo(),
	}
}

// reading is what the child read of the node.
type reading struct {
	opts    options
	node    string
	backend string
	// err is why the GPU backend could not be made at all; close lets go of it.
	err   error
	close func()
	res   gpureceiver.OneShotResult
	// nvmlUp is gpu_nvml_up (absent on amdgpu), detected gpu_devices_detected.
	nvmlUp, detected *int64
	gpus             []*gpuReading
	faults           []k8sgpuhealthconnector.CheckFault
	// late are the calls that passed their deadline.
	late []gpureceiver.LateCall

	ib           pmetric.Metrics
	ibUnreadable int64
	ibErr        error
}

// gpuReading is one GPU's resource of the collection.
type gpuReading struct {
	gpuReport
	// links are gpu_nvlink_state by link; timeouts gpu_nvml_timeouts_total by call.
	links    map[string]int64
	timeouts map[string]int64
	// recovery is gpu_recovery_action, nil where the driver does not report it.
	recovery *recoveryaction.Action
}

func read(opts options, set receiver.Settings, onLate func(gpureceiver.LateCall)) *reading {
	r := &reading{opts: opts, backend: string(opts.Backend), close: func() {}}
	r.node, _ = nodename.Resolve(opts.NodeName)
	var lateMu sync.Mutex
	one, err := gpureceiver.NewOneShot(opts.receiverConfig(), set, func(c gpureceiver.LateCall) {
		lateMu.Lock()
		r.late = append(r.late, c)
		lateMu.Unlock()
		onLate(c)
	})
	if err != nil {
		r.err = err
	} else {
		r.res = one.Collect()
		r.close = one.Close
		r.view(r.res.Metrics)
		r.faults = k8sgpuhealthconnector.JudgeCollection(r.res.Metrics, r.res.XIDs, opts.XIDClasses)
	}
	if opts.IBPorts > 0 {
		r.ib, r.ibUnreadable, r.ibErr = taskreceiver.ReadInfiniBand(opts.RootPath, taskreceiver.InfiniBandConfig{
			ExpectedActivePorts: opts.IBPorts, ExpectedRateGbps: opts.IBRateGbps,
		}, set)
	}
	lateMu.Lock()
	r.late = slices.Clone(r.late)
	lateMu.Unlock()
	return r
}

// view reads the collection's resources: the node's and each GPU's.
func (r *reading) view(md pmetric.Metrics) {
	for _, rm := range md.ResourceMetrics().All() {
		attrs := rm.Resource().Attributes()
		if n := str(attrs, gpunames.KeyNodeName); n != "" {
			r.node = n
		}
		minor, isGPU := attrs.Get(gpunames.KeyMinorNumber)
		var g *gpuReading
		if isGPU {
			index, _ := strconv.Atoi(minor.AsString())
			g = &gpuReading{gpuReport: gpuReport{Index: index, UUID: str(attrs, gpunames.KeyUUID), Health: map[string]int64{}}, links: map[string]int64{}, timeouts: map[string]int64{}}
			r.gpus = append(r.gpus, g)
		}
		eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
			a := dp.Attributes()
			v := dp.IntValue()
			if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
				v = int64(dp.DoubleValue())
			}
			switch {
			case g == nil && name == gpunames.GPUNVMLUp:
				r.nvmlUp = &v
			case g == nil && name == gpunames.GPUDevicesDetected:
				r.detected = &v
			case g == nil:
			case name == gpunames.GPUUp:
				g.Up = v == 1
			case name == gpunames.GPUHealth:
				g.Health[str(a, gpunames.KeyCondition)] = v
			case name == gpunames.GPUInfo:
				g.Model, g.PCIBusID, g.DriverVersion = str(a, gpunames.KeyModel), str(a, gpunames.KeyPCIBusID), str(a, gpunames.KeyDriverVersion)
			case name == gpunames.GPUNVLinkState:
				g.links[str(a, gpunames.KeyLink)] = v
			case name == gpunames.GPURecoveryAction:
				a := recoveryaction.Action(v)
				g.recovery, g.RecoveryAction = &a, a.String()
			case name == gpunames.GPUNVMLTimeoutsTotal:
				g.timeouts[str(a, gpunames.KeyCall)] = v
			case name == gpunames.GPUXIDErrorsTotal:
				code, _ := strconv.ParseUint(str(a, gpunames.KeyXID), 10, 64)
				g.XIDs = append(g.XIDs, xidCount{XID: code, Count: v, Resolution: str(a, gpunames.KeyResolution)})
			}
		})
		if g != nil && len(g.links) > 0 {
			up := 0
			for _, s := range g.links {
				up += int(s)
			}
			g.NVLinksUp = &up
		}
	}
	slices.SortFunc(r.gpus, func(a, b *gpuReading) int { return a.Index - b.Index })
}

// eachPoint calls f with each live gauge and sum point of rm.
func eachPoint(rm pmetric.ResourceMetrics, f func(name string, dp pmetric.NumberDataPoint)) {
	for _, sm := range rm.ScopeMetrics().All() {
		for _, m := range sm.Metrics().All() {
			dps, ok := metricpoints.Numbers(m)
			if !ok {
				continue
			}
			for _, dp := range dps.All() {
				if !dp.Flags().NoRecordedValue() {
					f(m.Name(), dp)
				}
			}
		}
	}
}

func str(attrs pcommon.Map, key string) string {
	if v, ok := attrs.Get(key); ok {
		return v.AsString()
	}
	return ""
}
