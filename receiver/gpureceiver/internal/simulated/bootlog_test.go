// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kernel log since boot has the XIDs due by now, in the order they happened, delivered
// through NVML's events or not.
func TestBootLog(t *testing.T) {
	srv, clk := newServer(t, `
profile: dgxa100
gpus: 2
faults:
  - {at: 2m, gpu: 0, kind: xid, xid: 48}
  - {at: 1m, gpu: 1, kind: xid, xid: 149, message: "NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x00086226)"}
  - {at: 1h, gpu: 1, kind: xid, xid: 79}
`)
	read := func() string {
		b, err := io.ReadAll(srv.BootLog())
		require.NoError(t, err)
		return string(b)
	}
	assert.Empty(t, read(), "nothing is due at boot")
	clk.Advance(5 * time.Minute)
	assert.Equal(t, "NVRM: Xid (PCI:0000:"+busOf(srv, 1)+":00): 149, NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x00086226)\n"+
		"NVRM: Xid (PCI:0000:"+busOf(srv, 0)+":00): 48, pid='<unknown>', name=<unknown>, simulated\n", read())
}

func busOf(srv *Server, gpu int) string {
	return fmt.Sprintf("%02x", srv.devices[gpu].pci.Bus)
}
