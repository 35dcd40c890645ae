// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// FuzzProcNet: the /proc network parsers never panic, and what they accept the text spells.
func FuzzProcNet(f *testing.F) {
	f.Add([]byte(netDevHeader + "  eth0: 1000     100    0    0    0     0          0         0 2000     200    0    0    0     0       0          0\n"))
	f.Add([]byte("net:[4026531992]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := netTotals(b); err == nil && c.rx != 0 {
			assert.Contains(t, string(b), ":", "a device was read")
		}
		if ns, err := parseNetNamespaceLink(b); err == nil {
			assert.Equal(t, "net:["+strconv.FormatUint(ns, 10)+"]", string(b))
		}
	})
}
