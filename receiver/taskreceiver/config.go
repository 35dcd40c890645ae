// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// Config of the task receiver.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// RootPath is where the host's / is mounted: /proc and /sys/fs/cgroup are read below it.
	RootPath string `mapstructure:"root_path"`
	// NodeName labels every series (node_name); empty means this machine's host name.
	NodeName string `mapstructure:"node_name"`
	// ProcessMemThreshold is the resident memory above which a process gets process_mem_usage_byte.
	ProcessMemThreshold int64 `mapstructure:"process_mem_threshold"`
	// ServiceNamespaces are the Kubernetes namespaces whose containers are platform services
	// (service_* metrics) rather than tasks.
	ServiceNamespaces []string `mapstructure:"service_namespaces"`
	// Filesystem selects the mounts reported by node_filesystem_*, as node_exporter's flags do.
	Filesystem FilesystemConfig `mapstructure:"filesystem"`
	// Disk selects the block devices reported by node_disk_*, as node_exporter's flags do.
	Disk DiskConfig `mapstructure:"disk"`
	// InfiniBand reports the RDMA ports of /sys/class/infiniband (InfiniBand and RoCE).
	InfiniBand InfiniBandConfig `mapstructure:"infiniband"`
	// Slurm makes each Slurm job step a task.
	Slurm SlurmConfig `mapstructure:"slurm"`
}

// SlurmConfig makes each Slurm job step on the node a task: its processes' usage (its cgroup's)
// as task_* series with slurm_job_id, slurm_step, username and job_name, as gpu_attribution's
// slurm source labels its GPUs.
type SlurmConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// CgroupSlice is cgroup.conf's CgroupSlice (cgroup v2, Slurm 25.11 and later).
	CgroupSlice string `mapstructure:"cgroup_slice"`
}

// InfiniBandConfig switches the InfiniBand collection and states what the node's fabric should
// be. The expectation is the node's, so it lives here, per node pool, and is emitted as metrics
// that the shipped alerts compare the ports with; the alerts' thresholds (error rates, flaps)
// are the same everywhere and live in the rules.
type InfiniBandConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// ExpectedActivePorts is how many ports should be ACTIVE at ExpectedRateGbps or faster
	// (node_infiniband_expected_active_ports); 0 states nothing.
	ExpectedActivePorts int `mapstructure:"expected_active_ports"`
	// ExpectedRateGbps is the rate, in the kernel's Gb/s (400 for NDR), each of those ports
	// should have trained at; 0 accepts any.
	ExpectedRateGbps float64 `mapstructure:"expected_rate_gbps"`
}

// FilesystemConfig mirrors node_exporter's filesystem collector flags.
type FilesystemConfig struct {
	MountPointsExclude string        `mapstructure:"mount_points_exclude"`
	FSTypesExclude     string        `mapstructure:"fs_types_exclude"`
	StatfsTimeout      time.Duration `mapstructure:"statfs_timeout"`
}

// DiskConfig mirrors node_exporter's diskstats collector flags.
type DiskConfig struct {
	DeviceExclude string `mapstructure:"device_exclude"`
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault.
func (cfg *Config) Validate() error {
	var errs []error
	if !filepath.IsAbs(cfg.RootPath) {
		errs = append(errs, fmt.Errorf("root_path must be an absolute path, got %q", cfg.RootPath))
	} else if fi, err := os.Stat(filepath.Join(cfg.RootPath, "proc")); err != nil || !fi.IsDir() {
		errs = append(errs, fmt.Errorf("root_path %q has no proc directory: mount the host's / there (read-only) or set root_path to where it is", cfg.RootPath))
	}
	if cfg.ProcessMemThreshold < 0 {
		errs = append(errs, fmt.Errorf("process_mem_threshold must not be negative, got %d", cfg.ProcessMemThreshold))
	}
	for key, expr := range map[string]string{
		"filesystem::mount_points_exclude": cfg.Filesystem.MountPointsExclude,
		"filesystem::fs_types_exclude":     cfg.Filesystem.FSTypesExclude,
		"disk::device_exclude":             cfg.Disk.DeviceExclude,
	} {
		if _, err := regexp.Compile(expr); err != nil {
			errs = append(errs, fmt.Errorf("%s is not a valid regular expression: %w", key, err))
		}
	}
	if ib := cfg.InfiniBand; ib.ExpectedActivePorts < 0 || ib.ExpectedRateGbps < 0 {
		errs = append(errs, fmt.Errorf("infiniband::expected_active_ports and expected_rate_gbps must not be negative, got %d and %g", ib.ExpectedActivePorts, ib.ExpectedRateGbps))
	} else if ib.ExpectedRateGbps > 0 && ib.ExpectedActivePorts == 0 {
		errs = append(errs, errors.New("infiniband::expected_rate_gbps needs expected_active_ports: it is the rate of those ports"))
	} else if ib.ExpectedActivePorts > 0 && !ib.Enabled {
		// The alerts would see ports missing that are only not read.
		errs = append(errs, errors.New("infiniband::expected_active_ports needs infiniband::enabled: the ports are not read"))
	}
	if cfg.Slurm.Enabled {
		if err := slurm.CheckSlice(cfg.Slurm.CgroupSlice); err != nil {
			errs = append(errs, fmt.Errorf("slurm::cgroup_slice %w", err))
		}
	}
	if cfg.Filesystem.StatfsTimeout <= 0 {
		errs = append(errs, fmt.Errorf("filesystem::statfs_timeout must be positive, got %s", cfg.Filesystem.StatfsTimeout))
	}
	return errors.Join(errs...)
}
