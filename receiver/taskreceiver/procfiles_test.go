// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const netDevHeader = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

func TestNetTotals(t *testing.T) {
	c, err := netTotals([]byte(netDevHeader +
		"    lo:    9000      10    0    0    0     0          0         0     9000      10    0    0    0     0       0          0\n" +
		"  eth0: 1000     100    0    0    0     0          0         0 2000     200    0    0    0     0       0          0\n" +
		"  eth1: 30     1    0    0    0     0          0         0 40     2    0    0    0     0       0          0\n"))
	assert.NoError(t, err)
	assert.Equal(t, netCounters{rx: 1030, tx: 2040}, c, "every device but lo")

	c, err = netTotals([]byte(netDevHeader))
	assert.NoError(t, err, "a namespace with no device but lo")
	assert.Zero(t, c)

	for content, want := range map[string]string{
		netDevHeader + "  eth0 1 2\n":                                "net/dev: a device line without a colon",
		netDevHeader + "  eth0: 1 2 3\n":                             "net/dev eth0: 3 fields, want 16",
		netDevHeader + "  eth0: x" + strings.Repeat(" 0", 15) + "\n": `net/dev eth0: bad number "x"`,
	} {
		_, err := netTotals([]byte(content))
		assert.EqualError(t, err, want)
	}
}

func TestParseNetNamespaceLink(t *testing.T) {
	ns, err := parseNetNamespaceLink([]byte("net:[4026531992]"))
	assert.NoError(t, err)
	assert.Equal(t, uint64(4026531992), ns)
	for _, bad := range []string{"", "net:[]", "net:[0]", "mnt:[4026531992]", "net:[4026531992", "net:[x]"} {
		_, err := parseNetNamespaceLink([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// FuzzProcFiles: the /proc parsers never panic, and what they accept the text spells.
func FuzzProcFiles(f *testing.F) {
	f.Add([]byte(netDevHeader + "  eth0: 1000     100    0    0    0     0          0         0 2000     200    0    0    0     0       0          0\n"))
	f.Add([]byte("net:[4026531992]"))
	f.Add([]byte("2001 (torch) D 1 2001 2001 0 -1 4194560 1000 0 0 0 150 40 0 0 20 0 1 0 100 16384000 1000 18446744073709551615\n"))
	for _, capture := range []string{"proc/26231/stat", "proc/584/stat", "proc/26232/stat", "proc/27079/stat", "proc/26231/net/dev"} {
		b, err := os.ReadFile(filepath.Join(captures, capture))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := netTotals(b); err == nil && c.rx != 0 {
			assert.Contains(t, string(b), ":", "a device was read")
		}
		if ns, err := parseNetNamespaceLink(b); err == nil {
			inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(string(b), "net:["), "]"), 10, 64)
			assert.NoError(t, err)
			assert.Equal(t, inode, ns)
			assert.True(t, strings.HasPrefix(string(b), "net:[") && strings.HasSuffix(string(b), "]"), "%q", b)
		}
		if st, err := parseProcessStat(b); err == nil {
			assert.Contains(t, string(b), "("+string(st.comm)+")")
		}
	})
}

func TestParseProcessStat(t *testing.T) {
	st, err := parseProcessStat([]byte("2001 (py (torch) x) D 1 2001 2001 0 -1 4194560 1000 0 0 0 150 40 0 0 20 0 1 0 100 16384000 1000 18446744073709551615 1 1 0\n"))
	assert.NoError(t, err)
	assert.Equal(t, processStat{state: 'D', rssPages: 1000, comm: []byte("py (torch) x")}, st)
	for content, want := range map[string]string{
		"2001 (torch":          "stat: no (comm)",
		"2001 (torch) S 1 2 3": "stat: 4 fields after comm, want at least 22",
		"2001 (torch) SS 1":    `stat: bad state "SS"`,
		"2001 (t) S" + strings.Repeat(" 0", 20) + " x": `stat: bad rss "x"`,
	} {
		_, err := parseProcessStat([]byte(content))
		assert.EqualError(t, err, want, content)
	}
}
