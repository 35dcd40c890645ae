// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// The /proc files read every collection for every container or process are read here, into the
// scraper's reused buffer, rather than through procfs, which allocates for each more than the
// file's size (measured on a node of 500 containers and 1,000 processes, cgroup v2, where a
// collection allocated 13.5 MB): Proc.Namespaces reads every namespace link of a process (ten on
// a current kernel) to give one, Proc.NetDev allocates a 4 KiB bufio.Scanner, a map and a struct
// per device (together 3.6 MB), and Proc.Stat scans all 52 fields with fmt.Fscan (1.3 MB, and the
// largest CPU cost after the cgroup files). Everything else in /proc, read once a collection or
// once a container (the node's net/dev with its device names, environ, cmdline…), still goes
// through procfs.

// netNamespace returns the inode of the network namespace of process pid (its ns/net link reads
// "net:[4026531992]").
func (s *taskScraper) netNamespace(pid string) (uint64, error) {
	link, err := s.procFiles.Readlink(s.procRoot, pid, "ns/net")
	if err != nil {
		return 0, err
	}
	return parseNetNamespaceLink(link)
}

func parseNetNamespaceLink(link []byte) (uint64, error) {
	inode, hasPrefix := bytes.CutPrefix(link, []byte("net:["))
	inode, hasSuffix := bytes.CutSuffix(inode, []byte("]"))
	if !hasPrefix || !hasSuffix {
		return 0, fmt.Errorf("ns/net: bad link %q", link)
	}
	n, err := strconv.ParseUint(string(inode), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("ns/net: bad link %q", link)
	}
	return n, nil
}

// netTotals sums received and transmitted bytes over the devices of a /proc/<pid>/net/dev,
// all but lo.
func netTotals(b []byte) (netCounters, error) {
	var c netCounters
	var lines int
	for line := range bytes.Lines(b) {
		lines++
		if lines <= 2 { // the two header lines
			continue
		}
		name, counters, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return netCounters{}, errors.New("net/dev: a device line without a colon")
		}
		if string(bytes.TrimSpace(name)) == "lo" {
			continue
		}
		// receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes …
		var field int
		for value := range bytes.FieldsSeq(counters) {
			var sum *uint64
			switch field {
			case 0:
				sum = &c.rx
			case 8:
				sum = &c.tx
			}
			if sum != nil {
				n, err := strconv.ParseUint(string(value), 10, 64)
				if err != nil {
					return netCounters{}, fmt.Errorf("net/dev %s: bad number %q", bytes.TrimSpace(name), value)
				}
				*sum += n
			}
			field++
		}
		if field != 16 {
			return netCounters{}, fmt.Errorf("net/dev %s: %d fields, want 16", bytes.TrimSpace(name), field)
		}
	}
	return c, nil
}

var pageSize = os.Getpagesize()

// processStat is what a collection needs of /proc/<pid>/stat, for every process of the node.
type processStat struct {
	state    byte
	rssPages int64
	comm     []byte // valid until the next read
}

// parseProcessStat reads "pid (comm) state ppid … rss …": comm may hold spaces and parentheses,
// so the fields start after its last ')'. rss is the 22nd field after comm.
func parseProcessStat(b []byte) (processStat, error) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return processStat{}, errors.New("stat: no (comm)")
	}
	st := processStat{comm: b[open+1 : closing]}
	var field int
	for value := range bytes.FieldsSeq(b[closing+1:]) {
		switch field {
		case 0:
			if len(value) != 1 {
				return processStat{}, fmt.Errorf("stat: bad state %q", value)
			}
			st.state = value[0]
		case 21:
			rss, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				return processStat{}, fmt.Errorf("stat: bad rss %q", value)
			}
			st.rssPages = rss
			return st, nil
		}
		field++
	}
	return processStat{}, fmt.Errorf("stat: %d fields after comm, want at least 22", field)
}
