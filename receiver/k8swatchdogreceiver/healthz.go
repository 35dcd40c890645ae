// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

const healthyAnswer = "ok"

// probeHealthz asks the API server for /healthz and reduces the outcome to the value of
// k8s_api_server_count's error label: "ok", or a short reason from a bounded set. OpenPAI put
// the raw body there; a body or an error message carries addresses, ports and timings, so every
// failure would have made a new series.
func probeHealthz(ctx context.Context, rc rest.Interface) string {
	body, err := rc.Get().AbsPath("/healthz").DoRaw(ctx)
	if err == nil {
		if strings.TrimSpace(string(body)) == healthyAnswer {
			return healthyAnswer
		}
		return "unexpected answer"
	}
	// client-go turns every non-2xx answer into an API status error; for an answer that was not
	// a Status object (as /healthz's is not) the body is kept in its causes.
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		var text []string
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				text = append(text, c.Message)
			}
		}
		return httpFailure(int(status.Status().Code), strings.Join(text, "\n"))
	}
	return transportFailure(ctx, err)
}

// httpFailure names an HTTP answer. For 500 the API server lists its checks as "[+]name ok" and
// "[-]name failed: reason withheld"; the names of the failed ones (etcd, poststarthook/...) are
// the useful and bounded part.
func httpFailure(code int, body string) string {
	switch code {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	}
	var failed []string
	for line := range strings.SplitSeq(body, "\n") {
		if name, ok := strings.CutPrefix(line, "[-]"); ok {
			name, _, _ = strings.Cut(name, " ")
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Sprintf("http %d: %s failed", code, strings.Join(failed, ","))
	}
	return fmt.Sprintf("http %d", code)
}

// transportFailure names an error that got no HTTP answer.
func transportFailure(ctx context.Context, err error) string {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		unkAuth x509.UnknownAuthorityError
		hostErr x509.HostnameError
		urlErr  *url.Error
		netErr  net.Error
	)
	switch {
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dnsErr):
		return "no such host"
	case errors.As(err, &certErr), errors.As(err, &unkAuth), errors.As(err, &hostErr):
		return "tls certificate"
	case errors.As(err, &urlErr):
		return "unreachable"
	}
	return "error"
}

// apiServerHost is the host part of the API server's address: OpenPAI's host_ip label held the
// whole URL (https://10.0.0.1:6443), which alert texts then printed as an IP.
func apiServerHost(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		// rest.Config allows "host:port" without a scheme.
		u, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return cfg.Host
		}
	}
	return u.Hostname()
}
