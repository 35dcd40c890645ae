// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
)

// TestPagesInContract: every family on the live pages of the dashboard tests' cluster (make
// demo's agent with every fault of the demo on a host running jobs and services, and the
// watchdog against a real kube-apiserver) is listed in docs/metrics.md with its type. The
// unit test test/contract checks the checked-in pages the same way.
func TestPagesInContract(t *testing.T) {
	c, err := contract.Load(filepath.Join(repoRoot(t), "docs", "metrics.md"))
	require.NoError(t, err)
	mc := startMonitoredCluster(t)
	for job, page := range mc.pages {
		_, body, err := scrape(page)
		require.NoError(t, err, job)
		families, err := contract.PageFamilies(bytes.NewReader(body))
		require.NoError(t, err, job)
		for _, problem := range c.CheckPage(families) {
			t.Errorf("%s's page: %s", job, problem)
		}
	}
}
