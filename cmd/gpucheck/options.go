// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// options are the command's flags; the child gets them as JSON.
type options struct {
	Output  string        `json:"output"`
	Timeout time.Duration `json:"timeout"`
	Verbose bool          `json:"verbose"`
	// GPUs is how many GPUs the node should have; -1: not checked.
	GPUs int `json:"gpus"`
	// NVLinks is how many NVLinks each GPU should have up; -1: as many as its peers of the
	// same model have.
	NVLinks int `json:"nvlinks"`
	// DriverVersion is the driver every GPU should run; empty: any, the same on every GPU.
	DriverVersion string `json:"driver_version"`
	// XIDClasses are the XID resolution classes that fail the check.
	XIDClasses []xid.Resolution `json:"xid_classes"`
	// IBPorts is how many RDMA ports should be ACTIVE at IBRateGbps or faster; 0: not checked.
	IBPorts    int     `json:"ib_ports"`
	IBRateGbps float64 `json:"ib_rate_gbps"`

	// The gpu receiver's settings, by its keys.
	Backend     gpureceiver.Backend `json:"backend"`
	LibraryPath string              `json:"library_path"`
	Scenario    string              `json:"scenario"`
	RootPath    string              `json:"root_path"`
	KmsgPath    string              `json:"kmsg_path"`
	// Kmsg reads the kernel log since boot for XIDs; false where it cannot be opened (a
	// container that is not privileged), and the xid check is skipped.
	Kmsg        bool          `json:"kmsg"`
	NodeName    string        `json:"node_name"`
	CallTimeout time.Duration `json:"call_timeout"`
}

// Output formats.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// errHelp is -h: the usage was printed, nothing checked.
var errHelp = errors.New("help requested")

// defaultXIDClasses are the XID classes the k8s_gpu_health connector acts on by default.
var defaultXIDClasses = []xid.Resolution{xid.ResolutionResetGPU, xid.ResolutionReboot, xid.ResolutionCheckNVLink}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("otelcol-gpu-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: otelcol-gpu-check [flags]\n\nChecks this GPU node once and exits 0 (healthy), 1 (unhealthy: each GPU and the action it calls for) or 2 (could not check). See docs/check.md.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Output, "o", outputTable, "output: table or json")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "the longest the check takes; reads still running then are abandoned and their GPUs reported hung")
	fs.BoolVar(&o.Verbose, "v", false, "write the readers' log to stderr")
	fs.IntVar(&o.GPUs, "gpus", -1, "GPUs the node should have (-1: not checked)")
	fs.IntVar(&o.NVLinks, "nvlinks", -1, "NVLinks each GPU should have up (-1: as many as the most its peers of the same model have)")
	fs.StringVar(&o.DriverVersion, "driver-version", "", "driver version every GPU should run (empty: any, the same on every GPU)")
	classes := fs.String("xid-classes", joinClasses(defaultXIDClasses), "XID resolution classes that fail the check, comma-separated (none, restart_app, reset_gpu, reboot, check_nvlink, unknown)")
	fs.IntVar(&o.IBPorts, "ib-ports", 0, "RDMA ports that should be ACTIVE at -ib-rate-gbps or faster (0: not checked)")
	fs.Float64Var(&o.IBRateGbps, "ib-rate-gbps", 0, "the rate, in Gb/s, each of those ports should have (400: NDR; 0: any)")
	backend := fs.String("backend", string(gpureceiver.BackendAuto), "the gpu receiver's backend: auto, nvml, amdgpu or simulated")
	fs.StringVar(&o.LibraryPath, "library-path", "", "NVML library to load (default libnvidia-ml.so.1)")
	fs.StringVar(&o.Scenario, "scenario", "", "scenario file of the simulated backend (demos and tests)")
	fs.StringVar(&o.RootPath, "root-path", "/", "where the host's / is mounted (a container's /hostfs)")
	fs.StringVar(&o.KmsgPath, "kmsg-path", "", "a file of kernel log lines to read instead of <root-path>/dev/kmsg")
	fs.BoolVar(&o.Kmsg, "kmsg", true, "read the kernel log since boot for XIDs (false: the xid check is skipped, as where the log cannot be opened)")
	fs.StringVar(&o.NodeName, "node-name", "", "the node's name in the report (default: the host name)")
	fs.DurationVar(&o.CallTimeout, "call-timeout", 5*time.Second, "deadline of each NVML call: a GPU whose call passes it is reported hung")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, errHelp
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q: every setting is a flag (-h lists them)", fs.Args())
	}
	o.Backend = gpureceiver.Backend(*backend)
	var errs []error
	o.XIDClasses = []xid.Resolution{} // none given: no XID fails the check
	if *classes != "" {
		for c := range strings.SplitSeq(*classes, ",") {
			r := xid.Resolution(strings.TrimSpace(c))
			if r == "" || r.Validate() != nil {
				errs = append(errs, fmt.Errorf("-xid-classes: %q is not an XID class (none, restart_app, reset_gpu, reboot, check_nvlink, unknown)", c))
				continue
			}
			o.XIDClasses = append(o.XIDClasses, r)
		}
	}
	errs = append(errs, o.validate()...)
	if err := o.receiverConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

func (o *options) validate() []error {
	var errs []error
	if err := o.Backend.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-backend: %w", err))
	}
	if o.Output != outputTable && o.Output != outputJSON {
		errs = append(errs, fmt.Errorf("-o must be table or json, got %q", o.Output))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout must be positive, got %s", o.Timeout))
	} else if o.CallTimeout >= o.Timeout {
		errs = append(errs, fmt.Errorf("-call-timeout (%s) must be shorter than -timeout (%s): a hung GPU is found when its call passes -call-timeout", o.CallTimeout, o.Timeout))
	}
	if o.GPUs < -1 {
		errs = append(errs, fmt.Errorf("-gpus must be a GPU count, or -1 not to check it, got %d", o.GPUs))
	}
	if o.NVLinks < -1 {
		errs = append(errs, fmt.Errorf("-nvlinks must be a link count, or -1 to compare with the GPU's peers, got %d", o.NVLinks))
	}
	if !o.Kmsg && o.KmsgPath != "" {
		errs = append(errs, errors.New("-kmsg-path is read only with -kmsg (the default): remove one"))
	}
	if o.IBPorts < 0 || o.IBRateGbps < 0 {
		errs = append(errs, fmt.Errorf("-ib-ports and -ib-rate-gbps must not be negative, got %d and %g", o.IBPorts, o.IBRateGbps))
	} else if o.IBRateGbps > 0 && o.IBPorts == 0 {
		errs = append(errs, errors.New("-ib-rate-gbps needs -ib-ports: it is the rate of those ports"))
	}
	return errs
}

// receiverConfig is the gpu receiver's configuration the check reads with; its Validate names
// the receiver's keys, which are the flags' with '_' for '-'.
func (o *options) receiverConfig() *gpureceiver.Config {
	cfg := gpureceiver.NewFactory().CreateDefaultConfig().(*gpureceiver.Config)
	cfg.Backend = o.Backend
	cfg.LibraryPath = o.LibraryPath
	cfg.Scenario = o.Scenario
	cfg.RootPath = o.RootPath
	cfg.XID.KmsgPath = o.KmsgPath
	cfg.XID.Kmsg = o.Kmsg
	cfg.NodeName = o.NodeName
	cfg.CallTimeout = o.CallTimeout
	if o.GPUs >= 0 {
		cfg.ConfiguredGPUCount = &o.GPUs
	}
	return cfg
}

func joinClasses(rs []xid.Resolution) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}
