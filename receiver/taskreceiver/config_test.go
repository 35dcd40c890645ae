// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	def := configtest.Load[Config](t, NewFactory(), "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	custom := configtest.Load[Config](t, NewFactory(), "custom")
	assert.Equal(t, 10*time.Second, custom.CollectionInterval)
	assert.Equal(t, "/hostfs", custom.RootPath)
	assert.Equal(t, "gpu-node-07", custom.NodeName)
	assert.Equal(t, int64(1<<30), custom.ProcessMemThreshold)
	assert.Equal(t, []string{"pai", "kube-system"}, custom.ServiceNamespaces)
	assert.Equal(t, FilesystemConfig{
		MountPointsExclude: `^/(dev|proc|sys)($|/)`,
		FSTypesExclude:     `^(tmpfs|overlay)$`,
		StatfsTimeout:      2 * time.Second,
	}, custom.Filesystem)
	assert.Equal(t, `^loop\d+$`, custom.Disk.DeviceExclude)
	assert.Equal(t, InfiniBandConfig{Enabled: true, ExpectedActivePorts: 8, ExpectedRateGbps: 400}, custom.InfiniBand)
	assert.Equal(t, SlurmConfig{Enabled: true, CgroupSlice: "gpu.slice"}, custom.Slurm)
	assert.False(t, configtest.Load[Config](t, NewFactory(), "no_infiniband").InfiniBand.Enabled)
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{"relative_root", `root_path must be an absolute path, got "hostfs"`},
		{"no_proc", `root_path "/nonexistent-root" has no proc directory: mount the host's / there (read-only) or set root_path to where it is`},
		{"negative_threshold", "process_mem_threshold must not be negative, got -1"},
		{"bad_mount_regexp", "filesystem::mount_points_exclude is not a valid regular expression: error parsing regexp: missing closing ): `^/(dev`"},
		{"bad_fstype_regexp", "filesystem::fs_types_exclude is not a valid regular expression: error parsing regexp: invalid character class range: `z-a`"},
		{"bad_disk_regexp", "disk::device_exclude is not a valid regular expression: error parsing regexp: invalid escape sequence: `\\1`"},
		{"zero_statfs_timeout", "filesystem::statfs_timeout must be positive, got 0s"},
		{"negative_ib_ports", "infiniband::expected_active_ports and expected_rate_gbps must not be negative, got -1 and 0"},
		{"ib_rate_without_ports", "infiniband::expected_rate_gbps needs expected_active_ports: it is the rate of those ports"},
		{"ib_expectation_disabled", "infiniband::expected_active_ports needs infiniband::enabled: the ports are not read"},
		{"slurm_bad_slice", `slurm::cgroup_slice must name the slice of slurmstepd's scope (cgroup.conf's CgroupSlice, system.slice by default), got "../x.slice"`},
		{"zero_interval", `"collection_interval": requires positive value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(configtest.Load[Config](t, NewFactory(), tt.name))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestValidateRootPathWithProc accepts a root that has a proc directory, such as a fixture host.
func TestValidateRootPathWithProc(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath = t.TempDir()
	require.Error(t, cfg.Validate())
	require.NoError(t, os.Mkdir(filepath.Join(cfg.RootPath, "proc"), 0o755))
	require.NoError(t, cfg.Validate())
}
