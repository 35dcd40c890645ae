// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

const fabricScenario = `
profile: dgxh100
faults:
  - {at: 0s, gpu: 0, kind: fabric_down}
  - {at: 0s, gpu: 1, kind: fabric_degraded}
`

// driverWithout is the simulated server on a driver that lacks some optional symbols.
type driverWithout struct {
	*simulated.Server
	missing symbolsWithout
}

func (d driverWithout) Extensions() nvml.ExtendedInterface { return d.missing }

// TestFabric: each health mask check is reported where the driver has the v4 call; with only
// the v1 call the state and status are, without the mask; with neither, or on an A100, nothing:
// never a 0 that would read as "not started".
func TestFabric(t *testing.T) {
	clock := newFakeClock()
	md := startScraper(t, testConfig(), writeScenario(t, clock, fabricScenario), clock, nil).scrape()
	down, degraded, healthy := gpuResource(t, md, "0"), gpuResource(t, md, "1"), gpuResource(t, md, "2")
	assert.Equal(t, int64(nvml.GPU_FABRIC_STATE_NOT_STARTED), value(t, down, "gpu_fabric_state"))
	assert.Empty(t, points(down, "gpu_fabric_status"), "no status before registration completes")
	assert.Equal(t, int64(1), value(t, down, "gpu_fabric_health", "fabric_check", "fabric_manager_disconnected"))
	assert.Equal(t, int64(healthWarning), value(t, down, "gpu_health", "condition", "nvlink"))
	assert.Equal(t, int64(1), value(t, degraded, "gpu_fabric_health", "fabric_check", "degraded_bandwidth"))
	assert.Equal(t, int64(1), value(t, degraded, "gpu_fabric_health", "fabric_check", "route_recovery"))
	assert.Equal(t, int64(0), value(t, degraded, "gpu_fabric_health", "fabric_check", "route_unhealthy"))
	assert.Equal(t, int64(healthWarning), value(t, degraded, "gpu_health", "condition", "nvlink"))
	assert.Equal(t, int64(nvml.GPU_FABRIC_STATE_COMPLETED), value(t, healthy, "gpu_fabric_state"))
	assert.Equal(t, int64(nvml.SUCCESS), value(t, healthy, "gpu_fabric_status"))
	assert.Len(t, points(healthy, "gpu_fabric_health"), len(fabricFields))
	for _, dp := range points(healthy, "gpu_fabric_health") {
		assert.Zero(t, dp.IntValue())
	}
	assert.Equal(t, int64(healthOK), value(t, healthy, "gpu_health", "condition", "nvlink"))

	v1 := startScraper(t, testConfig(), driverWithout{writeScenario(t, clock, fabricScenario), symbolsWithout{symFabricInfoV4}}, clock, nil).scrape()
	assert.Equal(t, int64(nvml.GPU_FABRIC_STATE_NOT_STARTED), value(t, gpuResource(t, v1, "0"), "gpu_fabric_state"))
	assert.Equal(t, int64(healthWarning), value(t, gpuResource(t, v1, "0"), "gpu_health", "condition", "nvlink"))
	assert.Empty(t, points(gpuResource(t, v1, "1"), "gpu_fabric_health"), "v1 has no health mask")
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, v1, "1"), "gpu_health", "condition", "nvlink"), "nor the degradation it reports")

	old := startScraper(t, testConfig(), driverWithout{writeScenario(t, clock, fabricScenario), symbolsWithout{symFabricInfoV4, symFabricInfo}}, clock, nil).scrape()
	assert.Empty(t, points(gpuResource(t, old, "0"), "gpu_fabric_state"))

	a100 := startScraper(t, testConfig(), simServer(t, "dgxa100.yaml", clock), clock, nil).scrape()
	assert.Empty(t, points(gpuResource(t, a100, "0"), "gpu_fabric_state"), "NOT_SUPPORTED: absent")
	assert.Len(t, points(gpuResource(t, a100, "0"), "gpu_nvlink_state"), 12)
}

// TestNVLinkDown: a link seen up that goes down is a fault, for as long as it is down; a link
// already down at the first collection is reported down and is no fault.
func TestNVLinkDown(t *testing.T) {
	clock := newFakeClock()
	src := startScraper(t, testConfig(), writeScenario(t, clock, `
profile: dgxh100
faults:
  - {at: 0s, gpu: 0, kind: nvlink_down, link: 3}
  - {at: 10s, gpu: 1, kind: nvlink_down, link: 17, duration: 20s}
`), clock, nil)
	md := src.scrape()
	assert.Equal(t, int64(0), value(t, gpuResource(t, md, "0"), "gpu_nvlink_state", "link", "3"))
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, md, "0"), "gpu_health", "condition", "nvlink"))
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, md, "1"), "gpu_health", "condition", "nvlink"))

	clock.Advance(15 * time.Second)
	md = src.scrape()
	gpu1 := gpuResource(t, md, "1")
	assert.Equal(t, int64(0), value(t, gpu1, "gpu_nvlink_state", "link", "17"))
	assert.Equal(t, int64(1), value(t, gpu1, "gpu_nvlink_state", "link", "16"))
	assert.Equal(t, int64(healthWarning), value(t, gpu1, "gpu_health", "condition", "nvlink"))
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, md, "0"), "gpu_health", "condition", "nvlink"))

	clock.Advance(time.Minute)
	md = src.scrape()
	assert.Equal(t, int64(healthOK), value(t, gpuResource(t, md, "1"), "gpu_health", "condition", "nvlink"), "the link is back")
}
