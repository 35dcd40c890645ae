// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// Files of a report directory.
const (
	FileJSON            = "report.json"
	FileHTML            = "index.html"
	FileJobs            = "jobs.csv"
	FileUsers           = "users.csv"
	FileVirtualClusters = "virtual_clusters.csv"
	FileGPUs            = "gpus.csv"
	FileXIDs            = "xids.csv"
	// FileSlurmAccounts is written when the period has Slurm jobs.
	FileSlurmAccounts = "slurm_accounts.csv"
)

// Write puts the report into dir: JSON and CSV for tools, an HTML page for people.
func Write(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	page, err := renderHTML(r)
	if err != nil {
		return err
	}
	gpuRows, xidRows := gpuCSV(r.GPUs)
	var records error
	if len(r.SlurmAccounts) > 0 {
		records = writeCSV(filepath.Join(dir, FileSlurmAccounts), accountCSV(r.SlurmAccounts))
	}
	if r.JobRecords != nil {
		records = errors.Join(records, writeCSV(filepath.Join(dir, FileJobRecords), jobRecordsCSV(r.JobRecords)))
	}
	return errors.Join(records,
		publish(filepath.Join(dir, FileJSON), append(js, '\n')),
		writeCSV(filepath.Join(dir, FileJobs), usageCSV(r.Jobs, true)),
		writeCSV(filepath.Join(dir, FileUsers), usageCSV(r.Users, false)),
		writeCSV(filepath.Join(dir, FileVirtualClusters), usageCSV(r.VirtualClusters, false)),
		writeCSV(filepath.Join(dir, FileGPUs), gpuRows),
		writeCSV(filepath.Join(dir, FileXIDs), xidRows),
		writeCSV(filepath.Join(dir, FileFleet), fleetCSV(r.Fleet)),
		publish(filepath.Join(dir, FileHTML), page),
	)
}

// publish writes one of the report's files, readable by all as the CSV files are (os.Create):
// a report is for people and tools to read.
func publish(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644) //nolint:gosec // G306: as said above
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// optNum is a value that may be unknown (NaN): empty then.
func optNum(v JSONNum) string {
	if math.IsNaN(float64(v)) {
		return ""
	}
	return num(float64(v))
}

func usageCSV(rows []Usage, job bool) [][]string {
	head := []string{
		"name", "gpus", "gpu_hours_held", "gpu_hours_used", "efficiency", "gpu_hours_idle",
		"gpu_hours_idle_held", "gpu_hours_unknown", "peak_utilization_percent", "median_utilization_percent",
		"sm_active_percent", "tensor_active_percent", "busy_but_inefficient",
	}
	if job {
		head = append(head[:1:1], append([]string{"username", "virtual_cluster"}, head[1:]...)...)
	}
	out := [][]string{head}
	for i := range rows {
		u := &rows[i]
		row := []string{u.Name}
		if job {
			row = append(row, u.Username, u.VirtualCluster)
		}
		out = append(out, append(row, strconv.Itoa(u.GPUs), num(u.HeldHours), num(u.UsedHours),
			num(u.Efficiency), num(u.IdleHours), num(u.IdleHeldHours), num(u.UnknownHours),
			num(u.PeakUtil), num(u.MedianUtil), optNum(u.SMActive), optNum(u.TensorActive), strconv.FormatBool(u.BusyInefficient)))
	}
	return out
}

func gpuCSV(gpus []GPU) (gpuRows, xidRows [][]string) {
	gpuRows = [][]string{{
		"node_name", "minor_number", "uuid", "hours_available", "hours_unavailable",
		"hours_unknown", "xids", "ecc_single_bit", "ecc_double_bit", "retired_pages", "remapped_rows",
		"remap_pending", "remap_failed",
	}}
	xidRows = [][]string{{"node_name", "minor_number", "uuid", "xid", "count", "resolution", "severity", "meaning", "action"}}
	for i := range gpus {
		g := &gpus[i]
		var xids float64
		for _, x := range g.XIDs {
			xids += x.Count
			xidRows = append(xidRows, []string{g.Node, g.MinorNumber, g.UUID, x.Code, num(x.Count), x.Resolution, x.Severity, x.Meaning, x.Action})
		}
		gpuRows = append(gpuRows, []string{
			g.Node, g.MinorNumber, g.UUID, num(g.AvailableHours),
			num(g.UnavailableHours), num(g.UnknownHours), num(xids), num(g.ECCSingle), num(g.ECCDouble),
			num(g.RetiredPages), num(g.RemappedRows), strconv.FormatBool(g.RemapPending), strconv.FormatBool(g.RemapFailed),
		})
	}
	return gpuRows, xidRows
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.WriteAll(rows)
	return errors.Join(w.Error(), f.Close())
}
