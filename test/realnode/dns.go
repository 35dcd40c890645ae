// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"errors"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// clusterDomain is the node's cluster domain (the kubelet's clusterDomain).
const clusterDomain = "cluster.local."

// serviceIP finds a Service's cluster IP; found is false when there is no such Service, and ip
// nil when it has no cluster IP (headless).
type serviceIP func(namespace, name string) (ip net.IP, found bool, err error)

// serveDNS is the cluster's DNS, as far as the node needs one: what CoreDNS's kubernetes plugin
// answers for a Service's name (<service>.<namespace>.svc.cluster.local, its cluster IP), so
// that the agent on the host network reaches the gateway's Service by the name deploy/ gives
// it. Other names of the cluster domain do not exist; every other name is refused: no query
// leaves the node. It serves until conn is closed.
func serveDNS(conn net.PacketConn, lookup serviceIP) {
	buf := make([]byte, 512)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp, ok := answer(buf[:n], lookup); ok {
			_, _ = conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query; false for a message that is not a query.
func answer(query []byte, lookup serviceIP) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeRefused}
	var ip net.IP
	name := strings.ToLower(q.Name.String())
	if rest, ok := strings.CutSuffix(name, ".svc."+clusterDomain); ok && q.Class == dnsmessage.ClassINET {
		resp.Authoritative = true
		resp.RCode = dnsmessage.RCodeNameError
		if service, namespace, ok := strings.Cut(rest, "."); ok && !strings.Contains(namespace, ".") {
			var found bool
			var lookupErr error
			ip, found, lookupErr = lookup(namespace, service)
			switch {
			case lookupErr != nil:
				resp.RCode = dnsmessage.RCodeServerFailure
			case found:
				resp.RCode = dnsmessage.RCodeSuccess
			}
		}
	} else if strings.HasSuffix(name, "."+clusterDomain) || name == clusterDomain {
		resp.Authoritative = true
		resp.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, resp)
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(q)
	if ip4 := ip.To4(); ip4 != nil && resp.RCode == dnsmessage.RCodeSuccess && q.Type == dnsmessage.TypeA {
		_ = b.StartAnswers()
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: [4]byte(ip4)})
	}
	out, err := b.Finish()
	return out, err == nil
}
