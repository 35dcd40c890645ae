// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package stack // import "github.com/otelcol-gpu/otelcol-gpu/test/stack"

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/test/pki"
)

// Secrets are the files deploy/ mounts from its two Secrets, made fresh for a test: a CA, the
// gateway's serving certificate signed by it (for 127.0.0.1 and localhost), the bearer token
// both sides share, and a second CA that signed nothing the gateway presents (an agent given it
// must refuse the gateway).
type Secrets struct {
	// The Secret otelcol-gpu-gateway: serving certificate and key, and the token agents present.
	GatewayCert, GatewayKey, GatewayToken string
	// The Secret otelcol-gpu-agent: the CA that signed the gateway's certificate, and the token.
	AgentCA, AgentToken string
	// Token is the token's value and CA the trusted CA, for clients written in Go.
	Token string
	CA    *x509.CertPool
	// ForeignCA is the certificate file of a CA that did not sign the gateway's certificate.
	ForeignCA string
}

// NewSecrets writes a fresh set of Secrets under a temporary directory.
func NewSecrets(tb testing.TB) *Secrets {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range []string{"gateway", "agent", "foreign"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	s := &Secrets{
		GatewayCert:  filepath.Join(dir, "gateway", "tls.crt"),
		GatewayKey:   filepath.Join(dir, "gateway", "tls.key"),
		GatewayToken: filepath.Join(dir, "gateway", "token"),
		AgentCA:      filepath.Join(dir, "agent", "ca.crt"),
		AgentToken:   filepath.Join(dir, "agent", "token"),
		ForeignCA:    filepath.Join(dir, "foreign", "ca.crt"),
		Token:        randomToken(tb),
	}
	ca := pki.NewCA(tb, "otelcol-gpu test CA")
	s.CA = ca.Pool()
	ca.WriteCert(tb, s.AgentCA)
	ca.IssueServer(tb, "otelcol-gpu-gateway", s.GatewayCert, s.GatewayKey)
	pki.NewCA(tb, "a CA the agents do not trust").WriteCert(tb, s.ForeignCA)
	for _, path := range []string{s.GatewayToken, s.AgentToken} {
		if err := os.WriteFile(path, []byte(s.Token+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func randomToken(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}
