// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func restFor(t *testing.T, rc *rest.Config) rest.Interface {
	t.Helper()
	c, err := probeClient(rc)
	require.NoError(t, err)
	return c
}

func TestProbeHealthz(t *testing.T) {
	answer := func(code int, body string) http.HandlerFunc {
		return func(rw http.ResponseWriter, _ *http.Request) {
			rw.WriteHeader(code)
			_, _ = rw.Write([]byte(body))
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"ok", answer(http.StatusOK, "ok"), "ok"},
		{"ok with newline", answer(http.StatusOK, "ok\n"), "ok"},
		{"200 but not ok", answer(http.StatusOK, "starting"), "unexpected answer"},
		{
			"failed checks", answer(http.StatusInternalServerError,
				"[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n[-]etcd failed: reason withheld\nhealthz check failed"),
			"http 500: etcd,poststarthook/rbac/bootstrap-roles failed",
		},
		{"503 without body", answer(http.StatusServiceUnavailable, ""), "http 503"},
		{"unauthorized", answer(http.StatusUnauthorized, "Unauthorized"), "unauthorized"},
		{"forbidden", answer(http.StatusForbidden, "forbidden"), "forbidden"},
		{"timeout", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			assert.Equal(t, tt.want, probeHealthz(ctx, restFor(t, &rest.Config{Host: srv.URL})))
		})
	}
}

func TestProbeHealthzTransportFailures(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		assert.Equal(t, "connection refused", probeHealthz(t.Context(), restFor(t, &rest.Config{Host: url})))
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		defer srv.Close()
		assert.Equal(t, "tls certificate", probeHealthz(t.Context(), restFor(t, &rest.Config{Host: srv.URL})))
	})
}

func TestAPIServerHost(t *testing.T) {
	for host, want := range map[string]string{
		"https://10.0.0.1:6443":    "10.0.0.1",
		"https://[fd00::1]:6443":   "fd00::1",
		"10.96.0.1:443":            "10.96.0.1",
		"https://kube.example.org": "kube.example.org",
	} {
		assert.Equal(t, want, apiServerHost(&rest.Config{Host: host}), host)
	}
}

// FuzzHTTPFailure feeds arbitrary /healthz bodies: the label value must always name the status
// code and never carry a line of the body other than the names of failed checks.
func FuzzHTTPFailure(f *testing.F) {
	f.Add(500, "[+]ping ok\n[-]etcd failed: reason withheld\nhealthz check failed")
	f.Add(503, "")
	f.Add(500, "[-]\n[-] \n[-]a b c")
	f.Fuzz(func(t *testing.T, code int, body string) {
		got := httpFailure(code, body)
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			return
		}
		prefix := "http " + strconv.Itoa(code)
		if !strings.HasPrefix(got, prefix) {
			t.Fatalf("%q does not start with %q", got, prefix)
		}
		if strings.Contains(got, "\n") || strings.Contains(got, "reason withheld") {
			t.Fatalf("%q carries the body", got)
		}
	})
}
