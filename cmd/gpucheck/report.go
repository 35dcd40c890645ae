// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/nodename"
)

// Exit codes.
const (
	exitHealthy       = 0
	exitUnhealthy     = 1
	exitCouldNotCheck = 2
)

// schemaVersion is the JSON report's: fields are only ever added within one version.
const schemaVersion = 1

// Statuses of the node, a check and a finding.
const (
	statusHealthy   = "healthy"
	statusUnhealthy = "unhealthy"
	statusUnknown   = "unknown"

	checkPass    = "pass"
	checkFail    = "fail"
	checkUnknown = "unknown"
	checkSkipped = "skipped"
)

// report is the check's outcome, and the JSON of -o json (docs/check.md).
type report struct {
	SchemaVersion int     `json:"schema_version"`
	Node          string  `json:"node"`
	Status        string  `json:"status"`
	ExitCode      int     `json:"exit_code"`
	Started       string  `json:"started"`
	Seconds       float64 `json:"duration_seconds"`
	Backend       string  `json:"backend"`
	// GPUs are the GPUs the backend listed, in minor number order.
	GPUs []gpuReport `json:"gpus"`
	// Checks are every check, in the order of the checks table.
	Checks []checkReport `json:"checks"`
	// Findings are what failed or could not be checked, failures first.
	Findings []finding `json:"findings"`
}

type gpuReport struct {
	Index         int    `json:"index"`
	UUID          string `json:"uuid,omitempty"`
	Model         string `json:"model,omitempty"`
	PCIBusID      string `json:"pci_bus_id,omitempty"`
	DriverVersion string `json:"driver_version,omitempty"`
	// Up: the GPU answered every call.
	Up bool `json:"up"`
	// Health is gpu_health by condition: 0 ok, 1 warning, 2 fatal.
	Health map[string]int64 `json:"health"`
	// NVLinksUp is how many of its NVLinks are up, absent without NVLink.
	NVLinksUp *int `json:"nvlinks_up,omitempty"`
	// XIDs are its XIDs since boot, by code.
	XIDs []xidCount `json:"xids,omitempty"`
	// RecoveryAction is the driver's recovery action (gpu_recovery_action by name: none,
	// gpu_reset, node_reboot, ...), absent where the driver does not report it.
	RecoveryAction string `json:"recovery_action,omitempty"`
}

type xidCount struct {
	XID        uint64 `json:"xid"`
	Count      int64  `json:"count"`
	Resolution string `json:"resolution"`
}

type checkReport struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// finding is one failure or one thing that could not be checked.
type finding struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	// Subject is what it is about, in words: "GPU 3 (GPU-…)", "the node", "mlx5_0 port 1".
	Subject string `json:"subject"`
	// GPU and UUID name the GPU, when it is about one (GPU is its minor number).
	GPU  *int   `json:"gpu,omitempty"`
	UUID string `json:"uuid,omitempty"`
	// Kind is the k8s_gpu_health connector's fault kind, where the fault is one it knows.
	Kind string `json:"kind,omitempty"`
	XID  uint64 `json:"xid,omitempty"`
	// Action is the recommended action (reset_gpu, reboot, check_nvlink, inspect_hardware,
	// check_infiniband, update_driver), ActionWords what it takes.
	Action      string `json:"action,omitempty"`
	ActionWords string `json:"action_words,omitempty"`
	Severity    string `json:"severity,omitempty"`
	Message     string `json:"message"`
}

// newReport is an empty report of node (empty: the host's name).
func newReport(node, backend string) *report {
	if node == "" {
		node, _ = nodename.Resolve("")
	}
	return &report{Node: node, Backend: backend, GPUs: []gpuReport{}, Checks: []checkReport{}, Findings: []finding{}}
}

// conclude sets the node's status and exit code from the findings: any failure is unhealthy,
// else anything unknown is "could not check".
func (r *report) conclude(started, now time.Time) {
	r.SchemaVersion = schemaVersion
	r.Started = started.UTC().Format(time.RFC3339Nano)
	r.Seconds = now.Sub(started).Seconds()
	r.Status, r.ExitCode = statusHealthy, exitHealthy
	slices.SortStableFunc(r.Findings, func(a, b finding) int {
		return cmp.Compare(boolRank(a.Status != checkFail), boolRank(b.Status != checkFail))
	})
	for i := range r.Findings {
		if r.Findings[i].Status == checkFail {
			r.Status, r.ExitCode = statusUnhealthy, exitUnhealthy
			return
		}
		r.Status, r.ExitCode = statusUnknown, exitCouldNotCheck
	}
}

func (r *report) write(w io.Writer, format string) error {
	if format == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "otelcol-gpu-check on %s: %s (exit %d) in %.1fs, backend %s\n\n", r.Node, strings.ToUpper(r.Status), r.ExitCode, r.Seconds, r.Backend)
	if len(r.GPUs) > 0 {
		fmt.Fprintln(tw, "GPU\tUUID\tMODEL\tPCI\tDRIVER\tUP\tNVLINKS UP\tXIDS")
		for i := range r.GPUs {
			g := &r.GPUs[i]
			links := "-"
			if g.NVLinksUp != nil {
				links = strconv.Itoa(*g.NVLinksUp)
			}
			xids := make([]string, 0, len(g.XIDs))
			for _, x := range g.XIDs {
				xids = append(xids, fmt.Sprintf("%d×%d", x.XID, x.Count))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, g.UUID, g.Model, g.PCIBusID, g.DriverVersion, yesNo(g.Up), links, strings.Join(xids, " "))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, c.Detail)
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "FINDING\tSUBJECT\tCHECK\tACTION\tMESSAGE")
		for i := range r.Findings {
			f := &r.Findings[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Status, f.Subject, f.Check, f.Action, f.Message)
		}
	}
	return tw.Flush()
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
