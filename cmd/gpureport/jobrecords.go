// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/cmd/gpureport/internal/report"
)

// addJobRecords adds the records of the jobs that ended in r's period from the file at path,
// costed with the prices of the rules file at pricesPath; either may be empty.
func addJobRecords(r *report.Report, path, pricesPath string, stderr io.Writer) error {
	if pricesPath != "" {
		content, err := os.ReadFile(pricesPath)
		if err != nil {
			return fmt.Errorf("-prices: %w", err)
		}
		if r.Prices, err = report.ParsePrices(content); err != nil {
			return fmt.Errorf("-prices %s: %w", pricesPath, err)
		}
	}
	if path == "" {
		if pricesPath != "" {
			return errors.New("-prices costs the job records: give -job-records too")
		}
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("-job-records: %w", err)
	}
	defer f.Close()
	records, problems, err := report.ReadJobRecords(f, r.Start, r.End, r.Prices)
	if err != nil {
		return fmt.Errorf("-job-records %s: %w", path, err)
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "gpureport: -job-records %s: skipped %s\n", path, p)
	}
	r.JobRecords = records
	if r.JobRecords == nil {
		r.JobRecords = []report.JobRecord{} // read, and none ended in the period: an empty table
	}
	return nil
}
