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
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
)

// captures holds files of real machines that other projects published (testdata/captures/SOURCE.md
// names each), so that the parsers are held to what a kernel writes, not to our reading of it.
const captures = "testdata/captures/procfs"

func readCapture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(captures, rel))
	require.NoError(t, err)
	return b
}

func TestProcessStatCaptures(t *testing.T) {
	for _, tt := range []struct {
		file string
		want processStat
	}{
		{"proc/26231/stat", processStat{state: 'R', rssPages: 1981, comm: []byte("vim")}},
		// A comm of spaces and parentheses, and a second line after the stat line.
		{"proc/584/stat", processStat{state: 'R', rssPages: 155, comm: []byte("(a b ) ( c d) ")}},
		// A kernel thread: no memory, and fields of -2^63 before rss.
		{"proc/26232/stat", processStat{state: 'S', rssPages: 0, comm: []byte("ata_sff")}},
		{"proc/27079/stat", processStat{state: 'S', rssPages: 138, comm: []byte("pthread_load")}},
	} {
		st, err := parseProcessStat(readCapture(t, tt.file))
		require.NoError(t, err, tt.file)
		assert.Equal(t, tt.want, st, tt.file)
	}
}

func TestNetDevCapture(t *testing.T) {
	c, err := netTotals(readCapture(t, "proc/26231/net/dev"))
	require.NoError(t, err)
	assert.Equal(t, netCounters{rx: 438, tx: 648}, c, "eth0's bytes; lo left out")
}

func TestNetNamespaceCapture(t *testing.T) {
	link, err := os.Readlink(filepath.Join(captures, "proc/26231/ns/net"))
	require.NoError(t, err)
	ns, err := parseNetNamespaceLink([]byte(link))
	require.NoError(t, err)
	assert.Equal(t, uint64(4026531993), ns)
}

// TestInfiniBandCaptures collects the fabric of procfs's /sys/class/infiniband (an Omni-Path HFI,
// a two-port ConnectX-3 and a ConnectX-5 with hw_counters) and compares it, whole, with its golden
// page.
func TestInfiniBandCaptures(t *testing.T) {
	root := copyHost(t, "v2-systemd-crio")
	ib := filepath.Join(root, "sys", "class", "infiniband")
	require.NoError(t, os.RemoveAll(ib))
	require.NoError(t, os.CopyFS(ib, os.DirFS(filepath.Join(captures, "sys", "class", "infiniband"))))

	s := newStartedScraper(t, testConfig(root))
	var errs scrapererror.ScrapeErrors
	s.scrapeInfiniBand(pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0)), &errs)
	require.NoError(t, errs.Combine())
	assert.Empty(t, s.readErrors, "every HCA of the capture is read")
	goldentest.Metrics(t, filepath.Join("testdata", "expected", "infiniband-captures.yaml"), s.mb.Emit(), compareOptions...)
}
