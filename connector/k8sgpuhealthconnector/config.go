// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kubeclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// Config of the k8s_gpu_health connector.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`
	metadata.LogsBuilderConfig    `mapstructure:",squash"`

	// AuthType is serviceAccount (in-cluster) or kubeConfig.
	AuthType kubeclient.AuthType `mapstructure:"auth_type"`
	// KubeConfigPath is the kubeconfig file for auth_type kubeConfig; empty means the usual
	// lookup ($KUBECONFIG, then ~/.kube/config).
	KubeConfigPath string `mapstructure:"kubeconfig_path"`
	// Context selects a kubeconfig context other than the current one.
	Context string `mapstructure:"context"`
	// SyncTimeout bounds how long start-up waits for the first list of nodes. When it runs out
	// the collector starts anyway and nothing is written until the list has come.
	SyncTimeout time.Duration `mapstructure:"sync_timeout"`

	// Interval is how often the writer goes over every node even when no data came: time-based
	// rules (a fault's `for`, a cleared fault), an Event's count brought up to date during a
	// storm, and the connector's own metrics.
	Interval time.Duration `mapstructure:"interval"`
	// MaxDataAge is how old data may be, by its own timestamp, and still raise or clear a fault.
	// Older data (a backlog an edge agent sends after an outage) only informs: its XIDs are
	// counted and get an Event saying they came late, and nothing changes on the node.
	MaxDataAge time.Duration `mapstructure:"max_data_age"`
	// Faults are the faults that call for action: what turns the node's GPUHealthy False.
	Faults FaultsConfig `mapstructure:"faults"`
	// LeaderElection is the Lease that makes one collector of the cluster the writer.
	LeaderElection LeaderElectionConfig `mapstructure:"leader_election"`
	// Quarantine takes faulty nodes out of scheduling; off unless enabled.
	Quarantine QuarantineConfig `mapstructure:"quarantine"`
	// Validation is the gate before jobs land on a node; off unless enabled.
	Validation ValidationConfig `mapstructure:"validation"`
}

// ValidationConfig is the validation gate: a node that carries the taint (set when it joins, by
// the kubelet's --register-with-taints or a provisioner, and by the quarantine when it returns
// a node to service) keeps it until the node's agent has reported Passes healthy collections in
// a row and a run of otelcol-gpu-check that passed, and keeps it for a person when that has not
// happened within Timeout.
type ValidationConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// DryRun records what the gate would do and changes no node, as the quarantine's.
	DryRun      bool               `mapstructure:"dry_run"`
	TaintKey    string             `mapstructure:"taint_key"`
	TaintEffect corev1.TaintEffect `mapstructure:"taint_effect"`
	// Passes is how many collections in a row must pass: one healthy collection may be luck (a
	// link that has not retrained yet, a fabric not registered yet).
	Passes int `mapstructure:"passes"`
	// RequireCheck also waits for a run of otelcol-gpu-check that ended after the gate began
	// holding the node and passed, as the agent reports it (the gpu receiver's node_check).
	RequireCheck bool          `mapstructure:"require_check"`
	Timeout      time.Duration `mapstructure:"timeout"`
}

// QuarantineConfig is the policy that cordons (and taints) nodes whose faults call for action.
type QuarantineConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// DryRun logs and records what would be done and changes no node: the default, so that a
	// site sees what the policy does before it lets it act.
	DryRun bool `mapstructure:"dry_run"`
	// Cordon are the recommended actions (after escalation) that cordon a node; Taint those that
	// also taint it NoSchedule with TaintKey, the handle for a drainer.
	Cordon []Action `mapstructure:"cordon"`
	Taint  []Action `mapstructure:"taint"`
	// UncordonAfter returns a node this component cordoned to service once its GPUHealthy has
	// been True this long; 0 leaves that to a person.
	UncordonAfter time.Duration `mapstructure:"uncordon_after"`
	// EscalationWindow: the same class of fault coming back within it after the node was returned
	// to service raises the recommended action (reset_gpu, reboot, inspect_hardware) and its
	// severity; 0 never escalates.
	EscalationWindow time.Duration `mapstructure:"escalation_window"`
	Breaker          BreakerConfig `mapstructure:"breaker"`
	// GPUResourceNames make a node a GPU node, for the breaker's share: one of them in its
	// capacity.
	GPUResourceNames []string `mapstructure:"gpu_resource_names"`
	// DeviceTaint takes a GPU that a DRA driver publishes out of service alone, instead of its
	// node.
	DeviceTaint DeviceTaintConfig `mapstructure:"device_taint"`
}

// DeviceTaintConfig: where every faulty GPU of a node is a device in a ResourceSlice of one of
// Drivers on that node (the cluster allocates its GPUs through DRA), the quarantine marks each
// of those devices with a DeviceTaintRule of Effect instead of cordoning the node, so that the
// node's other GPUs stay in service. GPUs of the device plugin, and faults of the node itself,
// take the node as before.
type DeviceTaintConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Drivers are the DRA drivers whose devices are GPUs, named by their uuid attribute (as
	// NVIDIA's DRA driver publishes them).
	Drivers []string `mapstructure:"drivers"`
	// Effect is NoSchedule (no new claim gets the device) or NoExecute (the pods using it are
	// evicted too).
	Effect resourcev1.DeviceTaintEffect `mapstructure:"effect"`
}

// BreakerConfig is the circuit breaker: no new quarantine once MaxShare of the GPU nodes, or
// MaxNodes of them, were quarantined within Window, since that many faulty nodes at once is
// more likely a fault of the monitoring (a driver update, a bad XID table) than of the GPUs.
type BreakerConfig struct {
	MaxShare float64 `mapstructure:"max_share"`
	// MaxNodes also bounds the count; 0: the share alone.
	MaxNodes int           `mapstructure:"max_nodes"`
	Window   time.Duration `mapstructure:"window"`
}

// FaultsConfig chooses, among what the agents report, the faults that call for action.
type FaultsConfig struct {
	// XIDResolutions are the resolution classes (the gpu receiver's XID table, overridable there
	// per code) whose XIDs call for action.
	XIDResolutions []xid.Resolution `mapstructure:"xid_resolutions"`
	// The states the agents report as gpu_health, and the GPU count (gpu_missing).
	GPULost             StateFault `mapstructure:"gpu_lost"`
	GPUMissing          StateFault `mapstructure:"gpu_missing"`
	DriverHang          StateFault `mapstructure:"driver_hang"`
	DoubleBitECC        StateFault `mapstructure:"double_bit_ecc"`
	RowRemapPending     StateFault `mapstructure:"row_remap_pending"`
	RowRemapFailed      StateFault `mapstructure:"row_remap_failed"`
	RetiredPagesPending StateFault `mapstructure:"retired_pages_pending"`
	PCIeDowngrade       StateFault `mapstructure:"pcie_downgrade"`
	NVLinkFabric        StateFault `mapstructure:"nvlink_fabric"`
}

// StateFault is one state the agents report.
type StateFault struct {
	Enabled bool `mapstructure:"enabled"`
	// For is how long (by the data's timestamps) the state must last before it is a fault, so
	// that a passing one (a slow NVML call, a link retraining) changes nothing.
	For time.Duration `mapstructure:"for"`
}

// LeaderElectionConfig is client-go's leader election on a Lease.
type LeaderElectionConfig struct {
	LeaseName string `mapstructure:"lease_name"`
	// LeaseNamespace is the Lease's namespace; empty: the collector's own (its pod's, or its
	// kubeconfig context's).
	LeaseNamespace string        `mapstructure:"lease_namespace"`
	LeaseDuration  time.Duration `mapstructure:"lease_duration"`
	RenewDeadline  time.Duration `mapstructure:"renew_deadline"`
	RetryPeriod    time.Duration `mapstructure:"retry_period"`
}

// actionableResolutions are the XID classes that name an action (the others are counted only,
// or are the application's to handle).
var actionableResolutions = []xid.Resolution{xid.ResolutionResetGPU, xid.ResolutionReboot, xid.ResolutionCheckNVLink}

var _ confmap.Validator = (*Config)(nil)

// Validate checks the configuration at start-up, naming the key at fault.
func (cfg *Config) Validate() error {
	errs := []error{cfg.api().Check()}
	for _, d := range []struct {
		key   string
		value time.Duration
	}{{"sync_timeout", cfg.SyncTimeout}, {"interval", cfg.Interval}, {"max_data_age", cfg.MaxDataAge}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.key, d.value))
		}
	}
	errs = append(errs, cfg.Faults.validate(), cfg.LeaderElection.validate(), cfg.Quarantine.validate(), cfg.Validation.validate())
	return errors.Join(errs...)
}

// api is how the connector reaches the API server.
func (cfg *Config) api() kubeclient.Settings {
	return kubeclient.Settings{AuthType: cfg.AuthType, KubeConfigPath: cfg.KubeConfigPath, Context: cfg.Context}
}

func (f *FaultsConfig) validate() error {
	var errs []error
	for i, r := range f.XIDResolutions {
		if err := enum.Check(r, actionableResolutions); err != nil {
			errs = append(errs, fmt.Errorf("faults::xid_resolutions[%d]: %w (another class calls for no action here: give a code a class in the gpu receiver's xid::table)", i, err))
		}
		if slices.Index(f.XIDResolutions, r) < i {
			errs = append(errs, fmt.Errorf("faults::xid_resolutions lists %q twice", r))
		}
	}
	for _, k := range faultKinds {
		if k.config == nil {
			continue
		}
		if d := k.config(f).For; d < 0 {
			errs = append(errs, fmt.Errorf("faults::%s::for must not be negative, got %s", k.kind, d))
		}
	}
	return errors.Join(errs...)
}

func (le *LeaderElectionConfig) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(le.LeaseName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("leader_election::lease_name %q is not a valid object name: %s", le.LeaseName, strings.Join(msgs, "; ")))
	}
	if le.LeaseNamespace != "" {
		if msgs := validation.IsDNS1123Label(le.LeaseNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("leader_election::lease_namespace %q is not a valid namespace: %s", le.LeaseNamespace, strings.Join(msgs, "; ")))
		}
	}
	// client-go's own rules (leaderelection.NewLeaderElector), named by our keys.
	switch {
	case le.RetryPeriod <= 0:
		errs = append(errs, fmt.Errorf("leader_election::retry_period must be positive, got %s", le.RetryPeriod))
	case le.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(le.RetryPeriod)):
		errs = append(errs, fmt.Errorf("leader_election::renew_deadline (%s) must exceed %g times retry_period (%s)", le.RenewDeadline, leaderelection.JitterFactor, le.RetryPeriod))
	case le.LeaseDuration <= le.RenewDeadline:
		errs = append(errs, fmt.Errorf("leader_election::lease_duration (%s) must exceed renew_deadline (%s): a leader must renew before another may take the Lease", le.LeaseDuration, le.RenewDeadline))
	}
	return errors.Join(errs...)
}

// validate checks the policy whether or not it is enabled: turning it on must not be what
// reveals a mistake. Each action's value is its type's to check.
func (q *QuarantineConfig) validate() error {
	var errs []error
	for _, list := range []struct {
		key     string
		actions []Action
	}{{"cordon", q.Cordon}, {"taint", q.Taint}} {
		for i, a := range list.actions {
			if slices.Index(list.actions, a) < i {
				errs = append(errs, fmt.Errorf("quarantine::%s lists %q twice", list.key, a))
			}
		}
	}
	for _, a := range q.Taint {
		if !slices.Contains(q.Cordon, a) {
			errs = append(errs, fmt.Errorf("quarantine::taint lists %q, which quarantine::cordon does not: the taint goes with a cordon", a))
		}
	}
	for _, d := range []struct {
		key   string
		value time.Duration
	}{{"uncordon_after", q.UncordonAfter}, {"escalation_window", q.EscalationWindow}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("quarantine::%s must not be negative (0 turns it off), got %s", d.key, d.value))
		}
	}
	if q.Breaker.MaxShare <= 0 || q.Breaker.MaxShare > 1 {
		errs = append(errs, fmt.Errorf("quarantine::breaker::max_share must be above 0 and at most 1 (0.1 is 10 %% of the GPU nodes), got %g", q.Breaker.MaxShare))
	}
	if q.Breaker.MaxNodes < 0 {
		errs = append(errs, fmt.Errorf("quarantine::breaker::max_nodes must not be negative (0: the share alone), got %d", q.Breaker.MaxNodes))
	}
	if q.Breaker.Window <= 0 {
		errs = append(errs, fmt.Errorf("quarantine::breaker::window must be positive, got %s", q.Breaker.Window))
	}
	errs = append(errs, q.DeviceTaint.validate())
	if len(q.GPUResourceNames) == 0 {
		errs = append(errs, errors.New("quarantine::gpu_resource_names must list at least one resource, e.g. nvidia.com/gpu"))
	}
	for _, name := range q.GPUResourceNames {
		if !strings.Contains(name, "/") || len(validation.IsQualifiedName(name)) > 0 {
			errs = append(errs, fmt.Errorf("quarantine::gpu_resource_names: %q is not an extended resource name like nvidia.com/gpu", name))
		}
	}
	return errors.Join(errs...)
}

// deviceTaintEffects are the effects the quarantine may give a device's taint: the API's others
// (None, in later versions) take nothing out of service.
var deviceTaintEffects = []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute}

// validate checks the device taints whether or not they are enabled, as the quarantine's.
func (d *DeviceTaintConfig) validate() error {
	var errs []error
	if !slices.Contains(deviceTaintEffects, d.Effect) {
		errs = append(errs, fmt.Errorf("quarantine::device_taint::effect must be NoSchedule or NoExecute, got %q", d.Effect))
	}
	if d.Enabled && len(d.Drivers) == 0 {
		errs = append(errs, errors.New("quarantine::device_taint::drivers must name at least one DRA driver while device_taint is enabled, e.g. gpu.nvidia.com"))
	}
	for i, name := range d.Drivers {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("quarantine::device_taint::drivers[%d] %q is not a DRA driver name like gpu.nvidia.com: %s", i, name, strings.Join(msgs, "; ")))
		}
		if slices.Index(d.Drivers, name) < i {
			errs = append(errs, fmt.Errorf("quarantine::device_taint::drivers lists %q twice", name))
		}
	}
	return errors.Join(errs...)
}

// taintEffects are the effects a taint may have (corev1's).
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// validate checks the gate whether or not it is enabled, as the quarantine's.
func (v *ValidationConfig) validate() error {
	var errs []error
	if msgs := validation.IsQualifiedName(v.TaintKey); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("validation::taint_key %q is not a taint key like otelcol-gpu.io/validation-pending: %s", v.TaintKey, strings.Join(msgs, "; ")))
	}
	if v.TaintKey == TaintKey {
		errs = append(errs, fmt.Errorf("validation::taint_key must not be the quarantine's taint %s: the gate would remove what the quarantine set", TaintKey))
	}
	if !slices.Contains(taintEffects, v.TaintEffect) {
		errs = append(errs, fmt.Errorf("validation::taint_effect must be one of NoSchedule, PreferNoSchedule, NoExecute; got %q", v.TaintEffect))
	}
	if v.Passes < 1 {
		errs = append(errs, fmt.Errorf("validation::passes must be at least 1, got %d", v.Passes))
	}
	if v.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("validation::timeout must be positive, got %s", v.Timeout))
	}
	return errors.Join(errs...)
}
