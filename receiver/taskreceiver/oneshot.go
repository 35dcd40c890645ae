// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"fmt"
	"path/filepath"

	"github.com/prometheus/procfs/sysfs"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// ReadInfiniBand reads the RDMA ports under <root>/sys once, as a collection of the receiver
// does, for the node check (cmd/gpucheck): the node_infiniband_* metrics (with
// node_infiniband_expected_* when ib states an expectation), and the number of HCAs that could
// not be read. An error means the ports could not be listed.
func ReadInfiniBand(root string, ib InfiniBandConfig, set receiver.Settings) (md pmetric.Metrics, unreadable int64, err error) {
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath, cfg.InfiniBand = root, ib
	cfg.InfiniBand.Enabled = true
	s := newTaskScraper(cfg, set)
	if s.sys, err = sysfs.NewFS(filepath.Join(root, "sys")); err != nil {
		return pmetric.Metrics{}, 0, fmt.Errorf("root_path: %w", err)
	}
	var errs scrapererror.ScrapeErrors
	s.scrapeInfiniBand(pcommon.NewTimestampFromTime(s.clock.Now()), &errs)
	if err := errs.Combine(); err != nil {
		return pmetric.Metrics{}, 0, err
	}
	return s.mb.Emit(), s.readErrors[metadata.AttributeSourceInfiniband], nil
}

// The InfiniBand readings the node check compares, and the kernel's Gb/s in their bytes per
// second.
const (
	InfiniBandStateMetric = "node_infiniband_state_id"
	InfiniBandRateMetric  = "node_infiniband_rate_bytes_per_second"
	GbpsToBytes           = gbpsToBytes
)
