// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

func TestClusterDNS(t *testing.T) {
	lookup := func(namespace, name string) (net.IP, bool, error) {
		switch namespace + "/" + name {
		case "otelcol-gpu/otelcol-gpu-gateway":
			return net.ParseIP("10.96.0.42"), true, nil
		case "otelcol-gpu/headless":
			return nil, true, nil
		case "broken/api":
			return nil, false, errors.New("the API server is down")
		}
		return nil, false, nil
	}
	ask := func(name string, typ dnsmessage.Type) (dnsmessage.Header, []dnsmessage.Resource) {
		t.Helper()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		require.NoError(t, b.StartQuestions())
		require.NoError(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}))
		query, err := b.Finish()
		require.NoError(t, err)
		out, ok := answer(query, lookup)
		require.True(t, ok)
		var m dnsmessage.Message
		require.NoError(t, m.Unpack(out))
		assert.Equal(t, uint16(7), m.ID)
		assert.True(t, m.Response)
		require.Len(t, m.Questions, 1, "the question is echoed")
		return m.Header, m.Answers
	}

	h, answers := ask("otelcol-gpu-gateway.otelcol-gpu.svc.cluster.local.", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeSuccess, h.RCode)
	require.Len(t, answers, 1)
	assert.Equal(t, [4]byte{10, 96, 0, 42}, answers[0].Body.(*dnsmessage.AResource).A)

	h, answers = ask("OTELCOL-GPU-GATEWAY.otelcol-gpu.svc.cluster.local.", dnsmessage.TypeAAAA)
	assert.Equal(t, dnsmessage.RCodeSuccess, h.RCode, "the name exists")
	assert.Empty(t, answers, "but has no IPv6 address")

	h, answers = ask("headless.otelcol-gpu.svc.cluster.local.", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeSuccess, h.RCode)
	assert.Empty(t, answers)

	// The resolver's search list tries these first.
	for _, name := range []string{
		"otelcol-gpu-gateway.otelcol-gpu.svc.otelcol-gpu.svc.cluster.local.",
		"otelcol-gpu-gateway.otelcol-gpu.svc.svc.cluster.local.",
		"nothing.otelcol-gpu.svc.cluster.local.",
		"cluster.local.",
	} {
		h, _ = ask(name, dnsmessage.TypeA)
		assert.Equal(t, dnsmessage.RCodeNameError, h.RCode, name)
		assert.True(t, h.Authoritative, name)
	}
	h, _ = ask("api.broken.svc.cluster.local.", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeServerFailure, h.RCode)

	h, _ = ask("example.com.", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeRefused, h.RCode, "no name outside the cluster is answered")

	_, ok := answer([]byte{1, 2, 3}, lookup)
	assert.False(t, ok, "not a DNS message")
}
