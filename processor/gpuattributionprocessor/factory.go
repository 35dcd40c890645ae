// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
)

// NewFactory creates the gpu_attribution processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		RootPath:             "/",
		AllocationSources:    []Source{SourcePodResources, SourceNvidiaVisibleDevices, SourceAMDVisibleDevices, SourceProcess},
		RefreshInterval:      10 * time.Second,
		ZombieAfter:          5 * time.Minute,
		PodResources: PodResourcesConfig{
			// dcgm-exporter's default is 10 s inside the scrape; here it only bounds a refresh.
			Timeout: 5 * time.Second,
			// A kubelet restarted while the API server is slow lists no pods for tens of seconds;
			// a kubelet down for longer is a node to look at, not an allocation to trust.
			KeepLastAnswer: 3 * time.Minute,
			// NVIDIA's device plugin: whole GPUs and MIG profiles. ROCm's (ROCm/k8s-device-plugin):
			// amd.com/gpu, or with -resource_naming_strategy=mixed amd.com/<compute>_<memory>
			// after the GPUs' partition modes (spx|dpx|tpx|qpx|cpx, nps1|nps2|nps4|nps8).
			ResourceNames: slices.Clone(defaultResourceNames),
			// NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu) writes a claim's spec
			// into /var/run/cdi; /etc/cdi holds static ones.
			Drivers:     []string{"gpu.nvidia.com"},
			CDISpecDirs: slices.Clone(cdi.DefaultSpecDirs),
		},
		Slurm: SlurmConfig{CgroupSlice: slurm.DefaultSlice},
	}
}

var defaultResourceNames = []string{
	"nvidia.com/gpu", "nvidia.com/mig-*",
	"amd.com/gpu", "amd.com/spx_*", "amd.com/dpx_*", "amd.com/tpx_*", "amd.com/qpx_*", "amd.com/cpx_*",
}

func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p := newGPUAttribution(cfg.(*Config), set)
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
	)
}
