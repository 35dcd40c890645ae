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
	if cfg.Filesystem.StatfsTimeout <= 0 {
		errs = append(errs, fmt.Errorf("filesystem::statfs_timeout must be positive, got %s", cfg.Filesystem.StatfsTimeout))
	}
	return errors.Join(errs...)
}
