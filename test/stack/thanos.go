// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package stack // import "github.com/otelcol-gpu/otelcol-gpu/test/stack"

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// ThanosOptions say how StartThanos lays out the store.
type ThanosOptions struct {
	// Receivers is how many Thanos Receive processes share the hashring (each both routes and
	// ingests); ReplicationFactor how many of them hold each series.
	Receivers, ReplicationFactor int
	// ReceiveFlags are more flags of every receiver (--tsdb.out-of-order.time-window=4h).
	ReceiveFlags []string
	// RuleFiles, when set, are evaluated by Thanos Ruler every second through Query (--query),
	// and Query reads the Ruler's series back as one more Store API endpoint.
	RuleFiles []string
}

// Thanos is a distributed store as the scale-out overlay's README describes it: Thanos Receive
// processes in one hashring, and Thanos Query in front of all of them, deduplicating the
// replicas (each receiver announces replica="<its index>").
type Thanos struct {
	Receivers []*ThanosReceiver
	// Query is Thanos Query's address (it answers Prometheus' HTTP API).
	Query string
	// Ruler is Thanos Ruler's address (its /api/v1/rules and /api/v1/alerts) when RuleFiles
	// were given.
	Ruler string
	// Dir holds every receiver's TSDB (for the store's bytes on disk).
	Dir string
}

// ThanosReceiver is one Thanos Receive process.
type ThanosReceiver struct {
	// WriteURL takes Prometheus remote write; HTTP serves /metrics and /-/ready.
	WriteURL, HTTP string
	// Process: Stop it (SIGKILL for a crash) and StartAgain on the same ports and TSDB.
	Process *Process
}

// ThanosBinary is Thanos of test/thanos/build.sh (THANOS_BIN when set).
func ThanosBinary(tb testing.TB) string { return Built(tb, "THANOS_BIN", "test/thanos/build.sh") }

// StartThanos runs o.Receivers receivers, a Query and, with o.RuleFiles, a Ruler on free
// loopback ports and waits until Query answers from every receiver and the Ruler.
func StartThanos(tb testing.TB, o ThanosOptions) *Thanos {
	tb.Helper()
	bin := ThanosBinary(tb)
	t := &Thanos{Dir: tb.TempDir()}
	type ports struct{ grpc, http, write, capnp int }
	all := make([]ports, o.Receivers)
	type endpoint struct {
		Address   string `json:"address"`
		CapNProto string `json:"capnproto_address"`
	}
	var endpoints []endpoint
	for i := range all {
		all[i] = ports{FreePort(tb), FreePort(tb), FreePort(tb), FreePort(tb)}
		endpoints = append(endpoints, endpoint{fmt.Sprintf("127.0.0.1:%d", all[i].grpc), fmt.Sprintf("127.0.0.1:%d", all[i].capnp)})
	}
	hashring, err := json.Marshal([]map[string]any{{"hashring": "default", "endpoints": endpoints}})
	if err != nil {
		tb.Fatal(err)
	}
	hashringFile := filepath.Join(t.Dir, "hashring.json")
	if err := os.WriteFile(hashringFile, hashring, 0o600); err != nil {
		tb.Fatal(err)
	}
	query := []string{
		"query",
		fmt.Sprintf("--http-address=127.0.0.1:%d", FreePort(tb)),
		fmt.Sprintf("--grpc-address=127.0.0.1:%d", FreePort(tb)),
		"--query.replica-label=replica",
		// The receivers' replicas of a series hold the same samples: chain merges them 1:1
		// (the penalty algorithm, for scraping HA pairs, may skip samples where it switches).
		"--deduplication.func=chain",
	}
	for i, p := range all {
		args := append([]string{
			"receive",
			"--tsdb.path=" + filepath.Join(t.Dir, fmt.Sprintf("receive-%d", i)),
			fmt.Sprintf("--grpc-address=127.0.0.1:%d", p.grpc),
			fmt.Sprintf("--http-address=127.0.0.1:%d", p.http),
			fmt.Sprintf("--remote-write.address=127.0.0.1:%d", p.write),
			fmt.Sprintf("--receive.capnproto-address=127.0.0.1:%d", p.capnp),
			fmt.Sprintf("--receive.local-endpoint=127.0.0.1:%d", p.grpc),
			"--receive.hashrings-file=" + hashringFile,
			fmt.Sprintf("--receive.replication-factor=%d", o.ReplicationFactor),
			fmt.Sprintf(`--label=replica="%d"`, i),
		}, o.ReceiveFlags...)
		r := &ThanosReceiver{
			WriteURL: fmt.Sprintf("http://127.0.0.1:%d/api/v1/receive", p.write),
			HTTP:     fmt.Sprintf("http://127.0.0.1:%d", p.http),
			Process:  Start(tb, bin, args, nil),
		}
		t.Receivers = append(t.Receivers, r)
		query = append(query, fmt.Sprintf("--endpoint=127.0.0.1:%d", p.grpc))
	}
	queryHTTP := strings.TrimPrefix(query[1], "--http-address=")
	t.Query = "http://" + queryHTTP
	stores := len(t.Receivers)
	var rule []string
	if len(o.RuleFiles) > 0 {
		grpc := fmt.Sprintf("127.0.0.1:%d", FreePort(tb))
		t.Ruler = fmt.Sprintf("http://127.0.0.1:%d", FreePort(tb))
		rule = []string{
			"rule",
			"--data-dir=" + filepath.Join(t.Dir, "rule"),
			"--grpc-address=" + grpc,
			"--http-address=" + strings.TrimPrefix(t.Ruler, "http://"),
			"--query=" + queryHTTP,
			// As the tests' Prometheus evaluates them (evaluation_interval: 1s).
			"--eval-interval=1s",
			// A replica label of Query, as the receivers': Query drops it, so that the recorded
			// series and ALERTS have the labels a Prometheus evaluating the rules gives them (and
			// a second Ruler, for availability, would be deduplicated with this one).
			`--label=replica="ruler"`,
		}
		for _, f := range o.RuleFiles {
			rule = append(rule, "--rule-file="+f)
		}
		query = append(query, "--endpoint="+grpc)
		stores++
	}
	Start(tb, bin, query, nil)
	if rule != nil {
		Start(tb, bin, rule, nil)
	}
	for _, r := range t.Receivers {
		r.WaitReady(tb)
	}
	// Query has found every receiver's Store API.
	poll.Until(tb, time.Minute, "Thanos Query to reach every receiver (and the Ruler)", func() bool {
		body, err := Get(t.Query+"/api/v1/stores", 5*time.Second)
		if err != nil {
			return false
		}
		var resp struct {
			Data map[string][]struct {
				LastError *string `json:"lastError"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &resp) != nil {
			return false
		}
		healthy := 0
		for _, stores := range resp.Data {
			for _, s := range stores {
				if s.LastError == nil {
					healthy++
				}
			}
		}
		return healthy == stores
	})
	return t
}

// WaitReady waits until the receiver says it is ready (after a restart: its WAL replayed).
func (r *ThanosReceiver) WaitReady(tb testing.TB) {
	tb.Helper()
	poll.Until(tb, time.Minute, "Thanos Receive at "+r.HTTP+" to be ready", func() bool {
		_, err := Get(r.HTTP+"/-/ready", 5*time.Second)
		return err == nil
	})
}
