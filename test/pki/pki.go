// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package pki makes the certificate authorities, serving certificates and keys that end-to-end
// tests need (kube-apiserver's, the gateway's), fresh for each test and valid for a day.
package pki // import "github.com/otelcol-gpu/otelcol-gpu/test/pki"

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// CA is a certificate authority with its key.
type CA struct {
	Cert *x509.Certificate
	// DER is Cert's encoding.
	DER  []byte
	key  *ecdsa.PrivateKey
	next int64 // serial number of the next certificate
}

// NewCA makes a self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := NewKey(tb)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, DER: der, key: key, next: 2}
}

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// WriteCert writes the CA's certificate to path in PEM.
func (ca *CA) WriteCert(tb testing.TB, path string) {
	tb.Helper()
	WritePEM(tb, path, "CERTIFICATE", ca.DER)
}

// IssueServer signs a serving certificate for commonName, valid for 127.0.0.1, localhost and
// dnsNames, and writes it and its key to certPath and keyPath.
func (ca *CA) IssueServer(tb testing.TB, commonName, certPath, keyPath string, dnsNames ...string) {
	tb.Helper()
	key := NewKey(tb)
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(ca.next),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     append([]string{"localhost"}, dnsNames...),
	}, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	ca.next++
	WritePEM(tb, certPath, "CERTIFICATE", der)
	WriteKey(tb, keyPath, key)
}

// NewKey makes a P-256 key.
func NewKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// WriteKey writes k to path as a PKCS #8 PEM file, readable by its owner only.
func WriteKey(tb testing.TB, path string, k *ecdsa.PrivateKey) {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	WritePEM(tb, path, "PRIVATE KEY", der)
}

// WritePEM writes der to path as one PEM block of kind, readable by its owner only.
func WritePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
