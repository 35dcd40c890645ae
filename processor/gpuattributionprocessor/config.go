// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
)

// Source is where the processor learns which task holds a GPU.
type Source string

// Allocation sources, asked in the configured order; for each GPU the first that knows a holder wins.
const (
	SourcePodResources         Source = "pod_resources"
	SourceNvidiaVisibleDevices Source = "nvidia_visible_devices"
	SourceAMDVisibleDevices    Source = "amd_visible_devices"
	SourceProcess              Source = "process"
	SourceSlurm                Source = "slurm"
)

// Sources are the values a Source may take.
var Sources = []Source{SourcePodResources, SourceNvidiaVisibleDevices, SourceAMDVisibleDevices, SourceProcess, SourceSlurm}

// Validate accepts one of Sources.
func (s Source) Validate() error { return enum.Check(s, Sources) }

// Config of the gpu_attribution processor.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	// RootPath is where the host's / is mounted: /proc, /sys/fs/cgroup, /var/log/pods and the
	// kubelet's socket are read below it.
	RootPath string `mapstructure:"root_path"`
	// AllocationSources are asked in this order.
	AllocationSources []Source `mapstructure:"allocation_sources"`
	// RefreshInterval is how often the node's containers are listed (and, with pod_resources,
	// how often the kubelet is called): never per batch.
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// ZombieAfter is how long a container must outlive its pod to be a zombie.
	ZombieAfter  time.Duration      `mapstructure:"zombie_after"`
	PodResources PodResourcesConfig `mapstructure:"pod_resources"`
	// Slurm is how the node's Slurm lays out its steps, where slurm is a source.
	Slurm SlurmConfig `mapstructure:"slurm"`
}

// SlurmConfig is what the node's Slurm configuration changes in what the slurm source reads.
type SlurmConfig struct {
	// CgroupSlice is cgroup.conf's CgroupSlice (cgroup v2, Slurm 25.11 and later): the slice
	// slurmstepd's scope is in.
	CgroupSlice string `mapstructure:"cgroup_slice"`
	// JobMappingDir is dcgm-exporter's --hpc-job-mapping-dir on the host (read under
	// root_path): a file per GPU that a site's prolog writes with the ids of the jobs holding
	// it. Empty: none.
	JobMappingDir string `mapstructure:"job_mapping_dir"`
}

// PodResourcesConfig is the kubelet's pod-resources API.
type PodResourcesConfig struct {
	// Socket is the kubelet's socket; empty means var/lib/kubelet/pod-resources/kubelet.sock
	// under root_path.
	Socket string `mapstructure:"socket"`
	// Timeout bounds each call to the kubelet.
	Timeout time.Duration `mapstructure:"timeout"`
	// ResourceNames are the extended resources that are GPUs; a trailing * matches a prefix
	// (nvidia.com/mig-* is every MIG profile, amd.com/cpx_* every CPX partition's memory mode).
	ResourceNames []string `mapstructure:"resource_names"`
	// Drivers are the DRA drivers whose devices are GPUs; empty reads no DRA allocation.
	Drivers []string `mapstructure:"drivers"`
	// CDISpecDirs are where the node's CDI specs are (paths on the host, read under root_path):
	// what joins a DRA device to its GPU.
	CDISpecDirs []string `mapstructure:"cdi_spec_dirs"`
	// AgentPod is the collector's own pod (the downward API's POD_NAMESPACE and POD_NAME): an
	// answer of the kubelet that does not list it is incomplete (a kubelet that restarted and
	// has not synced its pods yet). Empty where the collector does not run as a pod.
	AgentPod PodName `mapstructure:"agent_pod"`
	// KeepLastAnswer is how long the last complete answer stands for the kubelet's while it
	// answers incompletely or not at all; after that, GPUs the kubelet manages show no holder.
	KeepLastAnswer time.Duration `mapstructure:"keep_last_answer"`
}

// PodName names a pod.
type PodName struct {
	Namespace string `mapstructure:"namespace"`
	Name      string `mapstructure:"name"`
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault; each allocation
// source's value is its type's to check.
func (cfg *Config) Validate() error {
	var errs []error
	if !filepath.IsAbs(cfg.RootPath) {
		errs = append(errs, fmt.Errorf("root_path must be an absolute path, got %q", cfg.RootPath))
	}
	if len(cfg.AllocationSources) == 0 {
		errs = append(errs, fmt.Errorf("allocation_sources must name at least one of %s", enum.List(Sources)))
	}
	for i, s := range cfg.AllocationSources {
		if slices.Index(cfg.AllocationSources, s) != i {
			errs = append(errs, fmt.Errorf("allocation_sources::%d: %q is listed twice", i, s))
		}
	}
	if cfg.RefreshInterval <= 0 {
		errs = append(errs, fmt.Errorf("refresh_interval must be positive, got %s", cfg.RefreshInterval))
	}
	if cfg.ZombieAfter <= 0 {
		errs = append(errs, fmt.Errorf("zombie_after must be positive, got %s", cfg.ZombieAfter))
	}
	if cfg.usesPodResources() {
		p := cfg.PodResources
		if p.Socket != "" && !filepath.IsAbs(p.Socket) {
			errs = append(errs, fmt.Errorf("pod_resources::socket must be an absolute path, got %q", p.Socket))
		}
		if p.Timeout <= 0 {
			errs = append(errs, fmt.Errorf("pod_resources::timeout must be positive, got %s", p.Timeout))
		} else if cfg.RefreshInterval > 0 && p.Timeout > cfg.RefreshInterval {
			errs = append(errs, fmt.Errorf("pod_resources::timeout (%s) must not exceed refresh_interval (%s): calls would pile up", p.Timeout, cfg.RefreshInterval))
		}
		if p.KeepLastAnswer <= 0 {
			errs = append(errs, fmt.Errorf("pod_resources::keep_last_answer must be positive, got %s", p.KeepLastAnswer))
		}
		if (p.AgentPod.Namespace == "") != (p.AgentPod.Name == "") {
			errs = append(errs, fmt.Errorf("pod_resources::agent_pod needs both namespace and name, or neither (got %q/%q): set them from the downward API's metadata.namespace and metadata.name", p.AgentPod.Namespace, p.AgentPod.Name))
		}
		if len(p.ResourceNames) == 0 {
			errs = append(errs, errors.New("pod_resources::resource_names must name at least one resource, e.g. nvidia.com/gpu"))
		}
		for i, n := range p.ResourceNames {
			if err := checkResourceName(n); err != nil {
				errs = append(errs, fmt.Errorf("pod_resources::resource_names::%d: %w", i, err))
			}
		}
		for i, d := range p.Drivers {
			if d == "" {
				errs = append(errs, fmt.Errorf("pod_resources::drivers::%d: empty; name a DRA driver, e.g. gpu.nvidia.com", i))
			}
		}
		if len(p.Drivers) > 0 && len(p.CDISpecDirs) == 0 {
			errs = append(errs, errors.New("pod_resources::cdi_spec_dirs must name at least one directory while pod_resources::drivers names DRA drivers, e.g. /var/run/cdi"))
		}
		for i, d := range p.CDISpecDirs {
			if !filepath.IsAbs(d) {
				errs = append(errs, fmt.Errorf("pod_resources::cdi_spec_dirs::%d must be an absolute path on the host, got %q", i, d))
			}
		}
	}
	if cfg.usesSlurm() {
		errs = append(errs, cfg.Slurm.validate()...)
	}
	return errors.Join(errs...)
}

func (s SlurmConfig) validate() []error {
	var errs []error
	if err := slurm.CheckSlice(s.CgroupSlice); err != nil {
		errs = append(errs, fmt.Errorf("slurm::cgroup_slice %w", err))
	}
	if s.JobMappingDir != "" && !filepath.IsAbs(s.JobMappingDir) {
		errs = append(errs, fmt.Errorf("slurm::job_mapping_dir must be an absolute path on the host (dcgm-exporter's --hpc-job-mapping-dir) or empty, got %q", s.JobMappingDir))
	}
	return errs
}

// checkResourceName accepts an extended resource name (<domain>/<name>), or its prefix
// followed by one *, as the kubelet lists device plugins' resources.
func checkResourceName(n string) error {
	domain, name, ok := strings.Cut(strings.TrimSuffix(n, "*"), "/")
	switch {
	case !ok || domain == "":
		return fmt.Errorf("%q is not an extended resource name: <domain>/<name>, e.g. amd.com/gpu", n)
	case strings.Contains(name, "/") || strings.Contains(name, "*"):
		return fmt.Errorf("%q: a name has one / and at most one *, at its end (amd.com/cpx_*)", n)
	case name == "" && !strings.HasSuffix(n, "*"):
		return fmt.Errorf("%q names no resource of %s: add its name, or * for all of them", n, domain)
	}
	return nil
}

func (cfg *Config) usesPodResources() bool {
	return slices.Contains(cfg.AllocationSources, SourcePodResources)
}

func (cfg *Config) usesSlurm() bool {
	return slices.Contains(cfg.AllocationSources, SourceSlurm)
}

// readsDRA: DRA claims are read when pod-resources is a source and some driver's are GPUs.
func (cfg *Config) readsDRA() bool {
	return cfg.usesPodResources() && len(cfg.PodResources.Drivers) > 0
}

func (cfg *Config) socket() string {
	if cfg.PodResources.Socket != "" {
		return cfg.PodResources.Socket
	}
	return filepath.Join(cfg.RootPath, "var", "lib", "kubelet", "pod-resources", "kubelet.sock")
}
