// Package loopback picks free TCP ports on 127.0.0.1 for the programs and tests that start
// local peers (Prometheus, node_exporter, collectors, Thanos): one place, so none of them binds a
// fixed port that could collide with another run.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// lowest is where FreePort starts looking: above the well-known and most registered services'
// ports.
const lowest = 10000

var (
	mu sync.Mutex
	// handedOut are the ports this process gave out: each once, though the listener that
	// proved it free is closed.
	handedOut = map[int]bool{}
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and that this process has
// not handed out before. The listener is closed before it returns, so the caller's peer can bind
// it. The port lies below the kernel's ephemeral range: the source port of any outgoing
// connection is taken from that range, and a peer dialing another that has not started yet (a
// Thanos receiver its hashring's others, Prometheus its targets) would otherwise take the port
// of a process about to bind it, which then fails with "address already in use".
func FreePort() (int, error) {
	highest := ephemeralStart() - 1
	if highest <= lowest {
		return anyPort()
	}
	mu.Lock()
	defer mu.Unlock()
	var lastErr error
	for range 200 {
		port := lowest + rand.IntN(highest-lowest+1)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			lastErr = err
			continue
		}
		_ = l.Close()
		handedOut[port] = true
		return port, nil
	}
	return 0, errors.Join(fmt.Errorf("no free loopback port in %d-%d after 200 tries", lowest, highest), lastErr)
}

// anyPort is the kernel's choice, for a machine whose ephemeral range leaves no room below it.
func anyPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Join(errors.New("no free loopback port"), err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux's default where the
// file cannot be read).
func ephemeralStart() int {
	const linuxDefault = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	var low, high int
	if _, err := fmt.Sscan(string(raw), &low, &high); err != nil || low <= 0 {
		return linuxDefault
	}
	return low
}
