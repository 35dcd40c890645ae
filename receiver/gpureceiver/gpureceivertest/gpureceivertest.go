// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpureceivertest runs the gpu receiver on a simulated scenario, or its amdgpu backend
// on a fixture tree of AMD GPUs' files, for what needs its output without a GPU: the tests of the components that take it (gpu_attribution,
// name_profile), the end-to-end tests and cmd/demonode, which lays out the demo node around the
// scenario's GPUs.
package gpureceivertest // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
)

// batchWait bounds the wait for the first collection, which the receiver makes at start.
const batchWait = 30 * time.Second

// SimulatedBatch is one collection of the gpu receiver on scenario's simulated GPUs.
func SimulatedBatch(scenario string) (pmetric.Metrics, error) {
	return simulatedBatch(scenario, 1, time.Hour)
}

// SimulatedIntervalBatch is the second collection of the gpu receiver on scenario's simulated
// GPUs, a second after the first: it has what is measured between two collections (GPM's
// activity, on the Hopper and Blackwell profiles). Its values follow the wall clock.
func SimulatedIntervalBatch(scenario string) (pmetric.Metrics, error) {
	return simulatedBatch(scenario, 2, time.Second)
}

// AMDBatch is one collection of the gpu receiver's amdgpu backend on the AMD GPUs' files under
// root (as internal/amdgpu/amdgpufixture writes them).
func AMDBatch(root string) (pmetric.Metrics, error) {
	return batch(func(cfg *gpureceiver.Config) {
		cfg.Backend = gpureceiver.BackendAMDGPU
		cfg.RootPath = root
	}, 1, time.Hour)
}

// simulatedBatch is collection n of the gpu receiver on scenario, collecting every interval.
func simulatedBatch(scenario string, n int, interval time.Duration) (pmetric.Metrics, error) {
	return batch(func(cfg *gpureceiver.Config) {
		cfg.Backend = gpureceiver.BackendSimulated
		cfg.Scenario = scenario
	}, n, interval)
}

// batch is collection n of the gpu receiver configured by configure, collecting every interval.
func batch(configure func(*gpureceiver.Config), n int, interval time.Duration) (pmetric.Metrics, error) {
	f := gpureceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*gpureceiver.Config)
	configure(cfg)
	cfg.NodeName = "gpu-node-07"
	cfg.CollectionInterval = interval
	cfg.InitialDelay = 0
	cfg.XID.Kmsg = false
	batches := make(chan pmetric.Metrics, 1)
	seen := 0
	first, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		// Collections are sequential: seen needs no lock.
		seen++
		if seen != n {
			return nil
		}
		select {
		case batches <- md:
		default:
		}
		return nil
	})
	if err != nil {
		return pmetric.Metrics{}, err
	}
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, first)
	if err != nil {
		return pmetric.Metrics{}, err
	}
	if err := r.Start(context.Background(), nil); err != nil {
		return pmetric.Metrics{}, err
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	select {
	case md := <-batches:
		return md, nil
	case <-time.After(batchWait):
		return pmetric.Metrics{}, fmt.Errorf("the gpu receiver (backend %s) sent no batch %d within %s", cfg.Backend, n, batchWait)
	}
}

// GPUs reads the GPUs' identities from a gpu receiver batch, by index, as the demo node takes
// them.
func GPUs(md pmetric.Metrics) map[int]demonode.GPU {
	gpus := map[int]demonode.GPU{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		minor, ok1 := rm.Resource().Attributes().Get(gpunames.KeyMinorNumber)
		uuid, ok2 := rm.Resource().Attributes().Get(gpunames.KeyUUID)
		if !ok1 || !ok2 {
			continue
		}
		index, err := strconv.Atoi(minor.Str())
		if err != nil {
			continue
		}
		g := demonode.GPU{UUID: uuid.Str()}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if m := ms.At(k); m.Name() == gpunames.GPUMIGMemoryTotalBytes {
					for l := 0; l < m.Gauge().DataPoints().Len(); l++ {
						if v, ok := m.Gauge().DataPoints().At(l).Attributes().Get(gpunames.KeyMIGUUID); ok {
							g.MIG = append(g.MIG, v.Str())
						}
					}
				}
			}
		}
		gpus[index] = g
	}
	return gpus
}
