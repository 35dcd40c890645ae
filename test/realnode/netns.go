// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// inNetNS runs f on an OS thread that is in the network namespace at path, and puts the thread
// back. A socket f opens stays in that namespace for its whole life, whichever thread uses it
// later: this is how the test process talks to the node without any route out of it.
func inNetNS[T any](path string, f func() (T, error)) (T, error) {
	var zero T
	ns, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer ns.Close()
	runtime.LockOSThread()
	own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return zero, err
	}
	defer own.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return zero, fmt.Errorf("enter the node's network namespace: %w", err)
	}
	defer func() {
		// A thread that cannot go back stays locked, and exits with its goroutine: no other
		// goroutine ever runs in the node's namespace by accident.
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return f()
}

// dialer connects from inside the network namespace at path.
func dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return inNetNS(path, func() (net.Conn, error) { return d.DialContext(ctx, network, addr) })
	}
}

// listenPacket listens from inside the network namespace at path.
func listenPacket(path, network, addr string) (net.PacketConn, error) {
	return inNetNS(path, func() (net.PacketConn, error) { return net.ListenPacket(network, addr) })
}

// httpClient makes its connections from inside the network namespace at path, and trusts the
// servers that ca signed.
func httpClient(path string, ca *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{DialContext: dialer(path), TLSClientConfig: &tls.Config{RootCAs: ca}},
	}
}
