// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulated"
)

// Backend is where the receiver reads its GPUs.
type Backend string

// Backends.
const (
	// BackendAuto is amdgpu on a node with the KFD and an amdgpu card and no NVIDIA driver,
	// else nvml; chosen at start.
	BackendAuto Backend = "auto"
	// BackendNVML is the driver's libnvidia-ml.
	BackendNVML Backend = "nvml"
	// BackendAMDGPU is the amdgpu driver's and the KFD's sysfs files under root_path.
	BackendAMDGPU Backend = "amdgpu"
	// BackendSimulated is a scenario on go-nvml's mock servers.
	BackendSimulated Backend = "simulated"
)

// Backends are the values a Backend may take.
var Backends = []Backend{BackendAuto, BackendNVML, BackendAMDGPU, BackendSimulated}

// Validate accepts one of Backends.
func (b Backend) Validate() error { return enum.Check(b, Backends) }

// Config of the gpu receiver.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`
	// Events enables the log records (logs pipeline); resource_attributes above apply to them too.
	Events metadata.EventsConfig `mapstructure:"events"`

	Backend Backend `mapstructure:"backend"`
	// LibraryPath is the NVML library to dlopen; empty means libnvidia-ml.so.1 on the loader path.
	LibraryPath string `mapstructure:"library_path"`
	// Scenario is the scenario file of the simulated backend.
	Scenario string `mapstructure:"scenario"`
	// RootPath is where the host's / is mounted; the kernel log is read at <root_path>/dev/kmsg
	// and the amdgpu backend's files under <root_path>/sys.
	RootPath string `mapstructure:"root_path"`
	// NodeName labels every series (node_name); empty means this machine's host name.
	NodeName string `mapstructure:"node_name"`
	// ConfiguredGPUCount is how many GPUs the node should have (configured_gpu_count).
	ConfiguredGPUCount *int `mapstructure:"configured_gpu_count"`
	// CallTimeout is the deadline of every NVML call, and of each AMD GPU's file reads; a GPU
	// whose call passes it is reported down and skipped until the call returns, while the other
	// GPUs keep reporting.
	CallTimeout time.Duration `mapstructure:"call_timeout"`
	// InitRetry paces the NVML Init retries while the driver is missing.
	InitRetry InitRetryConfig `mapstructure:"init_retry"`
	// MemoryLeakThreshold is the framebuffer use, in bytes, above which a GPU that no process
	// holds counts as leaking (nvidiasmi_memory_leak_count); it absorbs the driver's own use.
	MemoryLeakThreshold int64 `mapstructure:"memory_leak_threshold"`
	// XID configures the XID sources and the XID table.
	XID XIDConfig `mapstructure:"xid"`
	// NodeCheck runs otelcol-gpu-check on the node now and then (off by default).
	NodeCheck NodeCheckConfig `mapstructure:"node_check"`
}

// InitRetryConfig is an exponential backoff.
type InitRetryConfig struct {
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	MaxInterval     time.Duration `mapstructure:"max_interval"`
}

// XIDConfig selects the XID sources and overrides the XID table.
type XIDConfig struct {
	// NVMLEvents reads XIDs from an NVML event set.
	NVMLEvents bool `mapstructure:"nvml_events"`
	// Kmsg reads "NVRM: Xid" lines from the kernel log.
	Kmsg bool `mapstructure:"kmsg"`
	// KmsgPath replaces <root_path>/dev/kmsg, e.g. with a file that a log shipper appends to.
	KmsgPath string `mapstructure:"kmsg_path"`
	// DedupWindow is how far apart the NVML event and the kernel log line of one XID may arrive.
	DedupWindow time.Duration `mapstructure:"dedup_window"`
	// HealthWindow is how long an XID keeps its severity in gpu_health{condition="xid"}.
	HealthWindow time.Duration `mapstructure:"health_window"`
	// Table overrides entries of the XID table, keyed by code; empty fields keep the default.
	Table map[string]xid.Info `mapstructure:"table"`
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault. The values of
// backend and of the XID table's severities and resolutions are their types' to check.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Scenario != "" && cfg.Backend != BackendSimulated {
		errs = append(errs, errors.New("scenario is only read with backend: simulated; remove it or set backend: simulated"))
	}
	if cfg.LibraryPath != "" && cfg.Backend != BackendNVML && cfg.Backend != BackendAuto {
		errs = append(errs, errors.New("library_path is only used with backend: nvml or auto; remove it or set backend: nvml"))
	}
	if cfg.Backend == BackendSimulated {
		if cfg.Scenario == "" {
			errs = append(errs, errors.New("scenario must name a scenario file when backend is simulated"))
		} else if _, err := simulated.Load(cfg.Scenario); err != nil {
			errs = append(errs, fmt.Errorf("scenario %q: %w", cfg.Scenario, err))
		}
	}
	if !filepath.IsAbs(cfg.RootPath) {
		errs = append(errs, fmt.Errorf("root_path must be an absolute path, got %q", cfg.RootPath))
	}
	if cfg.ConfiguredGPUCount != nil && *cfg.ConfiguredGPUCount < 0 {
		errs = append(errs, fmt.Errorf("configured_gpu_count must not be negative, got %d", *cfg.ConfiguredGPUCount))
	}
	if cfg.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("call_timeout must be positive, got %s", cfg.CallTimeout))
	}
	if cfg.InitRetry.InitialInterval <= 0 {
		errs = append(errs, fmt.Errorf("init_retry::initial_interval must be positive, got %s", cfg.InitRetry.InitialInterval))
	}
	if cfg.InitRetry.MaxInterval < cfg.InitRetry.InitialInterval {
		errs = append(errs, fmt.Errorf("init_retry::max_interval must be at least init_retry::initial_interval (%s), got %s", cfg.InitRetry.InitialInterval, cfg.InitRetry.MaxInterval))
	}
	if cfg.MemoryLeakThreshold < 0 {
		errs = append(errs, fmt.Errorf("memory_leak_threshold must not be negative, got %d", cfg.MemoryLeakThreshold))
	}
	errs = append(errs, cfg.XID.validate()...)
	errs = append(errs, cfg.NodeCheck.validate(cfg.CallTimeout)...)
	return errors.Join(errs...)
}

func (x *XIDConfig) validate() []error {
	var errs []error
	if x.KmsgPath != "" && !filepath.IsAbs(x.KmsgPath) {
		errs = append(errs, fmt.Errorf("xid::kmsg_path must be an absolute path, got %q", x.KmsgPath))
	}
	if x.DedupWindow < 0 {
		errs = append(errs, fmt.Errorf("xid::dedup_window must not be negative, got %s", x.DedupWindow))
	}
	if x.HealthWindow <= 0 {
		errs = append(errs, fmt.Errorf("xid::health_window must be positive, got %s", x.HealthWindow))
	}
	for key := range x.Table {
		if _, err := xid.ParseCode(key); err != nil {
			errs = append(errs, fmt.Errorf("xid::table: %w", err))
		}
	}
	return errs
}
