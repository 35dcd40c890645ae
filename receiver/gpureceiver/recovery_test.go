// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/internal/recoveryaction"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// TestRecoveryActionPolled: each collection reads the driver's recovery action (field 230) on
// every GPU: none where it asks for nothing, the action while the scenario's fault lasts, none
// again after it.
func TestRecoveryActionPolled(t *testing.T) {
	clock := newFakeClock()
	srv := writeScenario(t, clock, `
profile: dgxa100
faults:
  - {at: 0s, gpu: 1, kind: recovery_action, action: node_reboot}
  - {at: 0s, gpu: 2, kind: recovery_action, action: gpu_reset, duration: 20s}
`)
	cfg := testConfig()
	cfg.XID.NVMLEvents = false // the collections alone
	src := startScraper(t, cfg, srv, clock, nil)

	clock.Advance(5 * time.Second)
	md := src.scrape()
	for gpu, want := range map[string]recoveryaction.Action{"0": recoveryaction.None, "1": recoveryaction.NodeReboot, "2": recoveryaction.GPUReset, "7": recoveryaction.None} {
		assert.Equal(t, int64(want), value(t, gpuResource(t, md, gpu), "gpu_recovery_action"), "GPU %s", gpu)
	}
	clock.Advance(20 * time.Second)
	md = src.scrape()
	assert.Equal(t, int64(recoveryaction.None), value(t, gpuResource(t, md, "2"), "gpu_recovery_action"), "the action cleared")
	assert.Equal(t, int64(recoveryaction.NodeReboot), value(t, gpuResource(t, md, "1"), "gpu_recovery_action"))
}

// TestRecoveryActionFromEvent: NVML's recovery action event makes the receiver read the action
// at once, between collections, and log it; the GPU then falls off the bus, so no collection
// ever reads the action, and the metric still says what the driver asked for.
func TestRecoveryActionFromEvent(t *testing.T) {
	clock := newFakeClock()
	srv := writeScenario(t, clock, `
profile: dgxa100
faults:
  - {at: 10s, gpu: 1, kind: recovery_action, action: node_reboot}
  - {at: 20s, gpu: 1, kind: gpu_lost}
`)
	core, logs := observer.New(zap.WarnLevel)
	ss := settingsFor(testConfig(), clock)
	ss.set.Logger = zap.New(core)
	src := newNVMLNode(ss, srv, srv.Close)
	src.start(nil)
	t.Cleanup(func() {
		src.shutdown()
		waitOrFail(t, src.watcher.Wait, "the event watcher did not stop after shutdown")
	})

	md := src.scrape()
	assert.Equal(t, int64(recoveryaction.None), value(t, gpuResource(t, md, "1"), "gpu_recovery_action"))

	clock.Advance(15 * time.Second) // the event fires at 10 s; no collection runs
	poll.Until(t, 10*time.Second, "the recovery action event to be read and logged", func() bool {
		return logs.FilterMessageSnippet("recovery action").Len() > 0
	})
	logged := logs.FilterMessageSnippet("recovery action").All()[0].ContextMap()
	assert.Equal(t, "node_reboot", logged["recovery_action"])
	assert.Equal(t, int64(1), logged["gpu"])

	clock.Advance(10 * time.Second)
	md = src.scrape()
	rm := gpuResource(t, md, "1")
	assert.Equal(t, int64(0), value(t, rm, "gpu_up"), "the GPU is lost: no collection read the action")
	assert.Equal(t, int64(recoveryaction.NodeReboot), value(t, rm, "gpu_recovery_action"), "the event's reading stands")
}

// TestRecoveryActionNotSupported: a driver before R565 answers NOT_SUPPORTED for field 230: the
// metric is absent, nothing is logged, not even at debug, and the GPU's other field values are
// read as before.
func TestRecoveryActionNotSupported(t *testing.T) {
	clock := newFakeClock()
	lib := &olderDriver{Server: simServer(t, "dgxa100.yaml", clock), handles: map[int]*olderDriverDevice{}}
	core, logs := observer.New(zap.DebugLevel)
	ss := settingsFor(testConfig(), clock)
	ss.set.Logger = zap.New(core)
	src := newNVMLNode(ss, lib, lib.Close)
	src.start(nil)
	t.Cleanup(func() {
		src.shutdown()
		waitOrFail(t, src.watcher.Wait, "the event watcher did not stop after shutdown")
	})

	for range 3 {
		md := src.scrape()
		rm := gpuResource(t, md, "0")
		assert.Empty(t, points(rm, "gpu_recovery_action"))
		assert.Len(t, points(rm, "gpu_memory_temperature_celsius"), 1)
	}
	assert.Zero(t, logs.FilterMessageSnippet("field value").Len())
	assert.Zero(t, logs.FilterMessageSnippet("recovery action").Len())
}

// olderDriver is the simulation as a driver before R565 answers: no recovery action field.
type olderDriver struct {
	*simulated.Server
	mu      sync.Mutex
	handles map[int]*olderDriverDevice // one handle per GPU, as NVML's
}

func (o *olderDriver) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := o.Server.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handles[i] == nil {
		o.handles[i] = &olderDriverDevice{Device: d}
	}
	return o.handles[i], nvml.SUCCESS
}

type olderDriverDevice struct{ nvml.Device }

func (d *olderDriverDevice) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	ret := d.Device.GetFieldValues(values)
	for i := range values {
		if values[i].FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
			values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			values[i].Value = [8]byte{}
		}
	}
	return ret
}
