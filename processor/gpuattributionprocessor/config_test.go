// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	def := createDefaultConfig().(*Config)
	custom := createDefaultConfig().(*Config)
	custom.RootPath = "/hostfs"
	custom.AllocationSources = []Source{SourceNvidiaVisibleDevices, SourceAMDVisibleDevices, SourceProcess}
	custom.RefreshInterval = 30 * time.Second
	custom.ZombieAfter = 10 * time.Minute
	custom.PodResources = PodResourcesConfig{
		Socket: "/run/kubelet.sock", Timeout: 2 * time.Second, ResourceNames: []string{"nvidia.com/gpu", "example.com/shared-gpu", "amd.com/cpx_*"},
		Drivers: []string{"gpu.nvidia.com", "gpu.example.com"}, CDISpecDirs: []string{"/run/cdi"},
		AgentPod: PodName{Namespace: "otelcol-gpu", Name: "otelcol-gpu-agent-x7k2p"}, KeepLastAnswer: 90 * time.Second,
	}

	slurmNode := createDefaultConfig().(*Config)
	slurmNode.AllocationSources = []Source{SourceSlurm, SourceProcess}
	slurmNode.Slurm = SlurmConfig{CgroupSlice: "gpu.slice", JobMappingDir: "/var/run/dcgm-job-mapping"}

	for name, want := range map[string]*Config{"": def, "custom": custom, "slurm": slurmNode} {
		t.Run(component.NewIDWithName(metadata.Type, name).String(), func(t *testing.T) {
			cfg := configtest.Load[Config](t, NewFactory(), name)
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, want, cfg)
		})
	}
	assert.Equal(t, "/var/lib/kubelet/pod-resources/kubelet.sock", def.socket(), "the kubelet's socket under root_path")
}

// TestDefaultResourceNames: by default the GPUs of NVIDIA's and ROCm's device plugins are GPUs,
// whichever naming strategy ROCm's runs with; no other vendor's resource is.
func TestDefaultResourceNames(t *testing.T) {
	isGPU := resourceMatcher(createDefaultConfig().(*Config).PodResources.ResourceNames)
	for _, r := range []string{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "amd.com/spx_nps1", "amd.com/dpx_nps2", "amd.com/tpx_nps1", "amd.com/qpx_nps4", "amd.com/cpx_nps4", "amd.com/cpx_nps8"} {
		assert.True(t, isGPU(r), r)
	}
	for _, r := range []string{"amd.com/nic", "amd.com/xilinx_u200", "rdma/hca", "example.com/gpu"} {
		assert.False(t, isGPU(r), r)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"relative root", func(c *Config) { c.RootPath = "hostfs" }, `root_path must be an absolute path, got "hostfs"`},
		{"no sources", func(c *Config) { c.AllocationSources = nil }, "allocation_sources must name at least one of pod_resources, nvidia_visible_devices, amd_visible_devices, process, slurm"},
		{"unknown source", func(c *Config) { c.AllocationSources = []Source{"process", "crystal_ball"} }, `allocation_sources::1: must be one of pod_resources, nvidia_visible_devices, amd_visible_devices, process, slurm; got "crystal_ball"`},
		{"twice", func(c *Config) { c.AllocationSources = []Source{"process", "process"} }, `allocation_sources::1: "process" is listed twice`},
		{"refresh", func(c *Config) { c.RefreshInterval = 0 }, "refresh_interval must be positive, got 0s"},
		{"zombie", func(c *Config) { c.ZombieAfter = -time.Second }, "zombie_after must be positive, got -1s"},
		{"socket", func(c *Config) { c.PodResources.Socket = "kubelet.sock" }, `pod_resources::socket must be an absolute path, got "kubelet.sock"`},
		{"timeout", func(c *Config) { c.PodResources.Timeout = 0 }, "pod_resources::timeout must be positive, got 0s"},
		{"timeout above refresh", func(c *Config) { c.PodResources.Timeout = time.Minute }, "pod_resources::timeout (1m0s) must not exceed refresh_interval (10s)"},
		{"keep_last_answer", func(c *Config) { c.PodResources.KeepLastAnswer = 0 }, "pod_resources::keep_last_answer must be positive, got 0s"},
		{"agent pod without name", func(c *Config) { c.PodResources.AgentPod.Namespace = "otelcol-gpu" }, `pod_resources::agent_pod needs both namespace and name, or neither (got "otelcol-gpu"/"")`},
		{"resources", func(c *Config) { c.PodResources.ResourceNames = nil }, "pod_resources::resource_names must name at least one resource"},
		{"resource without domain", func(c *Config) { c.PodResources.ResourceNames = []string{"amd.com/gpu", "gpu"} }, `pod_resources::resource_names::1: "gpu" is not an extended resource name: <domain>/<name>, e.g. amd.com/gpu`},
		{"resource without name", func(c *Config) { c.PodResources.ResourceNames = []string{"amd.com/"} }, `pod_resources::resource_names::0: "amd.com/" names no resource of amd.com: add its name, or * for all of them`},
		{"star inside", func(c *Config) { c.PodResources.ResourceNames = []string{"amd.com/*_nps1"} }, `pod_resources::resource_names::0: "amd.com/*_nps1": a name has one / and at most one *, at its end (amd.com/cpx_*)`},
		{"two slashes", func(c *Config) { c.PodResources.ResourceNames = []string{"amd.com/cpx/nps1"} }, `pod_resources::resource_names::0: "amd.com/cpx/nps1": a name has one / and at most one *`},
		{"empty driver", func(c *Config) { c.PodResources.Drivers = []string{"gpu.nvidia.com", ""} }, "pod_resources::drivers::1: empty; name a DRA driver, e.g. gpu.nvidia.com"},
		{"no CDI dirs", func(c *Config) { c.PodResources.CDISpecDirs = nil }, "pod_resources::cdi_spec_dirs must name at least one directory while pod_resources::drivers names DRA drivers"},
		{"relative CDI dir", func(c *Config) { c.PodResources.CDISpecDirs = []string{"/etc/cdi", "run/cdi"} }, `pod_resources::cdi_spec_dirs::1 must be an absolute path on the host, got "run/cdi"`},
		{"empty slice", func(c *Config) { c.AllocationSources = []Source{SourceSlurm}; c.Slurm.CgroupSlice = "" }, `slurm::cgroup_slice must name the slice of slurmstepd's scope (cgroup.conf's CgroupSlice, system.slice by default), got ""`},
		{"slice out of the tree", func(c *Config) { c.AllocationSources = []Source{SourceSlurm}; c.Slurm.CgroupSlice = "../x.slice" }, `slurm::cgroup_slice must name the slice of slurmstepd's scope`},
		{"relative job mapping", func(c *Config) { c.AllocationSources = []Source{SourceSlurm}; c.Slurm.JobMappingDir = "run/jobs" }, `slurm::job_mapping_dir must be an absolute path on the host (dcgm-exporter's --hpc-job-mapping-dir) or empty, got "run/jobs"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.modify(cfg)
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("no DRA driver reads no DRA claim, and needs no CDI spec", func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		cfg.PodResources.Drivers = nil
		cfg.PodResources.CDISpecDirs = nil
		assert.NoError(t, confmap.Validate(cfg))
		assert.False(t, cfg.readsDRA())
	})
	t.Run("pod_resources settings unchecked when it is not a source", func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		cfg.AllocationSources = []Source{SourceProcess}
		cfg.PodResources.Timeout = 0
		assert.NoError(t, confmap.Validate(cfg))
	})
	t.Run("slurm settings unchecked when it is not a source", func(t *testing.T) {
		cfg := createDefaultConfig().(*Config)
		cfg.Slurm.CgroupSlice = ""
		assert.NoError(t, confmap.Validate(cfg))
	})
}
