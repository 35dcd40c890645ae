// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package prometheuspageexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/prometheuspageexporter"

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// view is the page as a scrape writes it: its pieces in order, families sorted by name. It is
// made at the first scrape after a change and shared by every scrape until the next change,
// so a second scraper (an HA pair) costs only the writing.
type view struct {
	pieces []*piece
	size   int    // bytes of text
	crc    uint32 // of the text, for the gzip trailer
	// deflatedSize is the gzip body's length: header, pieces, final block and trailer.
	deflatedSize int
}

// gzip's member header (no name, no time, unknown OS) and the final empty block that closes
// the deflate stream the pieces make (RFC 1951: BFINAL, fixed Huffman, end of block).
var (
	gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	finalBlock = []byte{0x03, 0x00}
)

const gzipTrailerSize = 8

// separator parts a key from its value in a hash.
var separator = []byte{0xff}

// current returns the view of the page at now, expiring what is due first.
func (p *page) viewAt(now time.Time) *view {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireDue(now)
	if p.current == nil {
		p.current = p.buildView()
	}
	return p.current
}

func (p *page) buildView() *view {
	names := make([]string, 0, len(p.families))
	for name := range p.families {
		names = append(names, name)
	}
	sort.Strings(names)
	v := &view{}
	keys := []uint64{}
	add := func(pc *piece) {
		v.pieces = append(v.pieces, pc)
		v.size += pc.size
		v.deflatedSize += len(pc.deflated)
		v.crc = crc32Combine(v.crc, pc.crc, pc.size)
	}
	for _, name := range names {
		fam := p.families[name]
		add(fam.header)
		keys = keys[:0]
		for k := range fam.pieces {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			add(fam.pieces[k])
		}
	}
	v.deflatedSize += len(gzipHeader) + len(finalBlock) + gzipTrailerSize
	return v
}

// writeText writes the page in the text format: the pieces' one deflate stream, inflated.
func (v *view) writeText(w io.Writer) error {
	stream := make([]io.Reader, 0, len(v.pieces)+1)
	for _, pc := range v.pieces {
		stream = append(stream, bytes.NewReader(pc.deflated))
	}
	stream = append(stream, bytes.NewReader(finalBlock))
	inflater := flate.NewReader(io.MultiReader(stream...))
	_, err := io.CopyN(w, inflater, int64(v.size)) // the text the pieces were made from, no more
	return errors.Join(err, inflater.Close())
}

// writeGzip writes the page gzip-compressed: one gzip member whose deflate stream is the
// pieces' compressed forms one after another.
func (v *view) writeGzip(w io.Writer) error {
	if _, err := w.Write(gzipHeader); err != nil {
		return err
	}
	for _, pc := range v.pieces {
		if _, err := w.Write(pc.deflated); err != nil {
			return err
		}
	}
	var trailer [2 + gzipTrailerSize]byte // finalBlock, CRC-32, ISIZE
	copy(trailer[:], finalBlock)
	binary.LittleEndian.PutUint32(trailer[len(finalBlock):], v.crc)
	binary.LittleEndian.PutUint32(trailer[len(finalBlock)+4:], uint32(v.size)) // gzip's ISIZE: the size modulo 2^32
	_, err := w.Write(trailer[:])
	return err
}

// expireDue drops the series whose last point arrived more than the expiration ago, once one
// may have; most calls only compare two times.
func (p *page) expireDue(now time.Time) {
	if p.nextExpiry.IsZero() || now.Before(p.nextExpiry) {
		return
	}
	cutoff := now.Add(-p.expiration).UnixNano()
	p.nextExpiry = time.Time{}
	for _, res := range p.resources {
		if res.oldest >= cutoff {
			if next := time.Unix(0, res.oldest).Add(p.expiration); p.nextExpiry.IsZero() || next.Before(p.nextExpiry) {
				p.nextExpiry = next
			}
			continue
		}
		for _, s := range slices.Clone(res.series) {
			if s.arrived < cutoff {
				p.remove(s)
			}
		}
	}
	p.renderDirty()
}

// targetInfo is the family of target_info, as the contrib exporter names and describes it.
const targetInfo = "target_info"

func (p *page) joinTarget(res *resource, attrs pcommon.Map, job, instance string) {
	labels := make([]label, 0, attrs.Len())
	for k, v := range attrs.All() {
		switch k {
		case "service.name", "service.namespace", "service.instance.id":
			continue // they are job and instance already
		}
		name, err := p.labelNamer.Build(k)
		if err != nil {
			return // the contrib exporter shows no target_info for such a resource either
		}
		labels = append(labels, label{name, v.AsString()})
	}
	// Attributes that become one label are joined with ";", in the attributes' order.
	slices.SortStableFunc(labels, func(a, b label) int { return strings.Compare(a.name, b.name) })
	res.targetLabels = joinSameName(labels)
	key := xxhash.Sum64String(targetInfo + "\xff" + job + "\xff" + instance)
	t, ok := p.targets[key]
	if !ok {
		t = &target{key: key, job: job, instance: instance, members: map[*resource]struct{}{}}
		p.targets[key] = t
	}
	t.members[res] = struct{}{}
	res.target = t
	p.renderTarget(t)
}

func (p *page) leaveTarget(res *resource) {
	t := res.target
	if t == nil {
		return
	}
	delete(t.members, res)
	if len(t.members) == 0 {
		delete(p.targets, t.key)
	}
	p.renderTarget(t)
}

// renderTarget makes t's target_info series: the attributes its resources share. (The contrib
// exporter shows the attributes of one of them, whichever it meets first at a scrape.)
func (p *page) renderTarget(t *target) {
	p.current = nil
	fam, ok := p.families[p.targetInfo]
	if len(t.members) == 0 {
		if ok {
			p.dropPiece(fam, t.key)
		}
		return
	}
	if !ok {
		fam = p.newFamily(p.targetInfo, "Target metadata", dto.MetricType_GAUGE)
		p.families[p.targetInfo] = fam
	}
	var shared []label
	for res := range t.members {
		if shared == nil {
			shared = slices.Clone(res.targetLabels)
			continue
		}
		shared = slices.DeleteFunc(shared, func(l label) bool {
			i, found := slices.BinarySearchFunc(res.targetLabels, l.name, func(m label, name string) int { return strings.Compare(m.name, name) })
			return !found || res.targetLabels[i].value != l.value
		})
	}
	labels := []*dto.LabelPair{labelPair("job", t.job), labelPair("instance", t.instance)}
	for _, l := range shared {
		if l.name == "job" || l.name == "instance" {
			continue
		}
		labels = append(labels, labelPair(l.name, l.value))
	}
	sort.Slice(labels, func(i, j int) bool { return labels[i].GetName() < labels[j].GetName() })
	text := append(seriesPrefix(p.targetInfo, labels), " 1\n"...)
	fam.pieces[t.key] = p.makePiece(text)
}

// joinSameName joins the values of labels of one name (sorted by name) with ";", as the
// contrib exporter joins attributes that become one label.
func joinSameName(labels []label) []label {
	out := labels[:0]
	for _, l := range labels {
		if n := len(out); n > 0 && out[n-1].name == l.name {
			out[n-1].value += ";" + l.value
			continue
		}
		out = append(out, l)
	}
	return slices.Clip(out)
}

// appendFloat writes f as expfmt's text format does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// attrSum identifies a set of attributes whatever their order, leaving out the keys in skip:
// the sum of each pair's hash, so that two sets' sums add up to their union's. Mixed into 64
// bits, two series colliding is far less likely than any fault of the machine it runs on.
func attrSum(attrs pcommon.Map, skip ...string) uint64 {
	var sum uint64
	for k, v := range attrs.All() {
		if !slices.Contains(skip, k) {
			sum += pairHash(k, v)
		}
	}
	return sum
}

func pairHash(k string, v pcommon.Value) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(k)
	_, _ = d.Write(separator)
	if v.Type() == pcommon.ValueTypeStr {
		_, _ = d.WriteString(v.Str())
	} else {
		_, _ = d.WriteString(v.AsString())
	}
	return mix(d.Sum64())
}

func scopeHash(sm pmetric.ScopeMetrics) uint64 {
	s := sm.Scope()
	var b strings.Builder
	b.WriteString(s.Name())
	b.WriteByte(0xff)
	b.WriteString(s.Version())
	b.WriteByte(0xff)
	b.WriteString(sm.SchemaUrl())
	return mix(xxhash.Sum64String(b.String()) ^ mix(attrSum(s.Attributes())))
}

// mix is a 64-bit finalizer (splitmix64's): it spreads every input bit over the output.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// expire drops what is due at now (the exporter's ticker).
func (p *page) expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireDue(now)
}
