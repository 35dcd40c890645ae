// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kube // import "github.com/otelcol-gpu/otelcol-gpu/test/kube"

import (
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/test/pki"
)

// certs are the files kube-apiserver needs: a CA, a serving certificate for 127.0.0.1 signed by
// it, and the key pair that signs and verifies service-account tokens. All are made fresh for
// each cluster, valid for a day.
type certs struct {
	caCert, serverCert, serverKey, saKey, saPub string
	pool                                        *x509.CertPool
}

func newCerts(tb testing.TB, dir string) *certs {
	tb.Helper()
	c := &certs{
		caCert:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "apiserver.crt"),
		serverKey:  filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
		saPub:      filepath.Join(dir, "sa.pub"),
	}
	ca := pki.NewCA(tb, "otelcol-gpu e2e CA")
	c.pool = ca.Pool()
	ca.WriteCert(tb, c.caCert)
	ca.IssueServer(tb, "kube-apiserver", c.serverCert, c.serverKey)

	if err := pki.NewKeyFiles(c.saKey, c.saPub); err != nil {
		tb.Fatal(err)
	}
	return c
}
