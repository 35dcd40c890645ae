// Package loopback picks free TCP ports on 127.0.0.1 for the programs and tests that start
// local peers (Prometheus, node_exporter, collectors): one place, so none of them binds a fixed
// port that could collide with another run.
package loopback

import (
	"errors"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The listener is closed
// before it returns, so the caller's peer can bind it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Join(errors.New("no free loopback port"), err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
