// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// Config of the k8s_watchdog receiver.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`
	metadata.LogsBuilderConfig     `mapstructure:",squash"`

	// AuthType is serviceAccount (in-cluster) or kubeConfig.
	AuthType kubeclient.AuthType `mapstructure:"auth_type"`
	// KubeConfigPath is the kubeconfig file for auth_type kubeConfig; empty means the usual
	// lookup ($KUBECONFIG, then ~/.kube/config).
	KubeConfigPath string `mapstructure:"kubeconfig_path"`
	// Context selects a kubeconfig context other than the current one.
	Context string `mapstructure:"context"`
	// SyncTimeout bounds how long start-up waits for the first full list of pods and nodes.
	// When it runs out the collector starts anyway: the informers keep trying, and the
	// cache-based metrics appear once they have synced.
	SyncTimeout time.Duration `mapstructure:"sync_timeout"`
	// HealthzTimeout bounds each GET /healthz probe.
	HealthzTimeout time.Duration `mapstructure:"healthz_timeout"`
	// GPUResourceNames are the extended resources counted as GPUs by k8s_node_gpu_*, summed:
	// nvidia.com/gpu and amd.com/gpu (the default), MIG profiles (nvidia.com/mig-1g.10gb),
	// AMD partitions (amd.com/cpx_nps4) or shared-GPU names.
	GPUResourceNames []string `mapstructure:"gpu_resource_names"`
	// ServiceLabel is the pod label that makes a pod a platform service (pai_pod_count,
	// pai_container_count); its value is service_name. OpenPAI used app.
	ServiceLabel string `mapstructure:"service_label"`
	// ClusterName, when set, becomes the k8s.cluster.name resource attribute of everything the
	// receiver emits, so that a backend holding several clusters can tell them apart.
	ClusterName string `mapstructure:"cluster_name"`
	// JobNameSources are tried in order to find a pod's job name for pai_job_pod_count.
	JobNameSources []JobNameSource `mapstructure:"job_name_sources"`
}

// JobNameSource names one place a platform puts a pod's job name: exactly one field is set.
type JobNameSource struct {
	Label      string `mapstructure:"label"`
	Annotation string `mapstructure:"annotation"`
	// Env is an environment variable with a literal value in one of the pod's containers.
	Env string `mapstructure:"env"`
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault; auth_type's value is
// its type's to check.
func (cfg *Config) Validate() error {
	var errs []error
	if err := cfg.api().Check(); err != nil {
		errs = append(errs, err)
	}
	if cfg.SyncTimeout <= 0 {
		errs = append(errs, fmt.Errorf("sync_timeout must be positive, got %s", cfg.SyncTimeout))
	}
	if cfg.HealthzTimeout <= 0 {
		errs = append(errs, fmt.Errorf("healthz_timeout must be positive, got %s", cfg.HealthzTimeout))
	} else if cfg.CollectionInterval > 0 && cfg.HealthzTimeout > cfg.CollectionInterval {
		errs = append(errs, fmt.Errorf("healthz_timeout (%s) must not exceed collection_interval (%s): probes would queue up behind each other", cfg.HealthzTimeout, cfg.CollectionInterval))
	}
	if len(cfg.GPUResourceNames) == 0 {
		errs = append(errs, errors.New("gpu_resource_names must list at least one resource, e.g. nvidia.com/gpu"))
	}
	seen := map[string]bool{}
	for _, name := range cfg.GPUResourceNames {
		if !strings.Contains(name, "/") || len(validation.IsQualifiedName(name)) > 0 {
			errs = append(errs, fmt.Errorf("gpu_resource_names: %q is not an extended resource name like nvidia.com/gpu", name))
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("gpu_resource_names lists %q twice, which would count its GPUs twice", name))
		}
		seen[name] = true
	}
	if msgs := validation.IsQualifiedName(cfg.ServiceLabel); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("service_label %q is not a valid label key: %s", cfg.ServiceLabel, strings.Join(msgs, "; ")))
	}
	for i, src := range cfg.JobNameSources {
		if err := src.validate(); err != nil {
			errs = append(errs, fmt.Errorf("job_name_sources[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// api is how the receiver reaches the API server.
func (cfg *Config) api() kubeclient.Settings {
	return kubeclient.Settings{AuthType: cfg.AuthType, KubeConfigPath: cfg.KubeConfigPath, Context: cfg.Context}
}

func (src JobNameSource) validate() error {
	set := 0
	for _, v := range []string{src.Label, src.Annotation, src.Env} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return errors.New("set exactly one of label, annotation or env")
	}
	if src.Env != "" {
		if msgs := validation.IsEnvVarName(src.Env); len(msgs) > 0 {
			return fmt.Errorf("env %q is not a valid variable name: %s", src.Env, strings.Join(msgs, "; "))
		}
		return nil
	}
	key := src.Label + src.Annotation
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return fmt.Errorf("%q is not a valid label or annotation key: %s", key, strings.Join(msgs, "; "))
	}
	return nil
}
