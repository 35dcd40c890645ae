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
	ca, err := New(name)
	if err != nil {
		tb.Fatal(err)
	}
	return ca
}

// New is NewCA for code that outlives a test (test/realnode's node, made in TestMain).
func New(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
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
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, DER: der, key: key, next: 2}, nil
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
	if err := ca.WriteCertFile(path); err != nil {
		tb.Fatal(err)
	}
}

// IssueServer signs a serving certificate for commonName, valid for 127.0.0.1, localhost and
// dnsNames, and writes it and its key to certPath and keyPath.
func (ca *CA) IssueServer(tb testing.TB, commonName, certPath, keyPath string, dnsNames ...string) {
	tb.Helper()
	err := ca.IssueFiles(Spec{CommonName: commonName, DNSNames: append([]string{"localhost"}, dnsNames...), IPs: []net.IP{net.ParseIP("127.0.0.1")}}, certPath, keyPath)
	if err != nil {
		tb.Fatal(err)
	}
}

// Spec is what a certificate is for.
type Spec struct {
	// CommonName and Organization are the subject: Kubernetes takes them as a client's user
	// name and groups.
	CommonName   string
	Organization []string
	// DNSNames and IPs are a serving certificate's names.
	DNSNames []string
	IPs      []net.IP
	// Client makes a client certificate instead of a serving one.
	Client bool
}

// IssueFiles signs a certificate for spec with a new key, and writes both (PEM, readable by their
// owner only) to certPath and keyPath.
func (ca *CA) IssueFiles(spec Spec, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	usage := x509.ExtKeyUsageServerAuth
	if spec.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(ca.next),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  spec.IPs,
		DNSNames:     spec.DNSNames,
	}, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	ca.next++
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

// WriteCertFile writes the CA's certificate to path in PEM.
func (ca *CA) WriteCertFile(path string) error {
	return writePEM(path, "CERTIFICATE", ca.DER)
}

// NewKeyFiles writes a new key pair: the private key to keyPath (PKCS #8) and its public key to
// publicPath (PKIX), both PEM; kube-apiserver signs and checks service-account tokens with
// such a pair.
func NewKeyFiles(keyPath, publicPath string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	err = writeKey(keyPath, k)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(publicPath, "PUBLIC KEY", pub)
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
