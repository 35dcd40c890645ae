// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kube // import "github.com/otelcol-gpu/otelcol-gpu/test/kube"

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"
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
	now := time.Now()

	caKey := newKey(tb)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "otelcol-gpu e2e CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(ca)
	writePEM(tb, c.caCert, "CERTIFICATE", caDER)

	serverKey := newKey(tb)
	serverDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, c.serverCert, "CERTIFICATE", serverDER)
	writeKey(tb, c.serverKey, serverKey)

	saKey := newKey(tb)
	writeKey(tb, c.saKey, saKey)
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, c.saPub, "PUBLIC KEY", pub)
	return c
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func writeKey(tb testing.TB, path string, k *ecdsa.PrivateKey) {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, path, "PRIVATE KEY", der)
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	writeFile(tb, path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}
