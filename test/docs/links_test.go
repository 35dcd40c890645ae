// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package docs holds the repository's Markdown to itself: every relative link names a file or
// folder that exists, and every #anchor a heading of the page it points into, as GitHub renders
// them; and the root README stays short. Links to other sites are not followed (the tests
// reach only loopback).
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// root is the repository, from this package's directory.
const root = "../.."

// TestLinksResolve checks every Markdown file of the repository but generated and build output.
func TestLinksResolve(t *testing.T) {
	pages, err := markdownFiles(os.DirFS(root))
	require.NoError(t, err)
	require.Contains(t, pages, "README.md", "the walk must find the root README")
	require.Contains(t, pages, "docs/design.md")
	docs := newSite(os.DirFS(root))
	for _, page := range pages {
		problems, err := docs.check(page)
		require.NoError(t, err)
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// readmeMaxLines is how long the root README may grow: what a first-time user needs (what this
// is, the two commands, the demos, where to read on); everything else is a page of docs/.
const readmeMaxLines = 250

func TestReadmeIsShort(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	assert.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move what a first-time user does not need into a page of docs/ and link it", lines)
}

// markdownFiles lists the *.md files under fsys, leaving out hidden and build folders (.git,
// .tools, distro/_build…) and mdatagen's documentation.md, which says nothing we wrote.
func markdownFiles(fsys fs.FS) ([]string, error) {
	var pages []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || p == "bin" || p == "report") {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") && name != "documentation.md" {
			pages = append(pages, p)
		}
		return nil
	})
	return pages, err
}

// site parses each page once and keeps its anchors.
type site struct {
	fsys    fs.FS
	md      goldmark.Markdown
	anchors map[string]map[string]bool
}

func newSite(fsys fs.FS) *site {
	return &site{
		fsys:    fsys,
		md:      goldmark.New(goldmark.WithExtensions(extension.GFM)),
		anchors: map[string]map[string]bool{},
	}
}

// link is one link of a page, with the line it starts on for the message.
type link struct {
	dest string
	line int
}

// parse returns a page's links and records its anchors.
func (s *site) parse(page string) ([]link, error) {
	source, err := fs.ReadFile(s.fsys, page)
	if err != nil {
		return nil, err
	}
	doc := s.md.Parser().Parse(text.NewReader(source))
	var links []link
	slugs := newSlugger()
	anchors := map[string]bool{}
	err = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			anchors[slugs.slug(plainText(n, source))] = true
			return ast.WalkContinue, nil
		case *ast.Link:
			links = append(links, link{dest: string(n.Destination), line: lineOf(n, source)})
		case *ast.Image:
			links = append(links, link{dest: string(n.Destination), line: lineOf(n, source)})
		}
		return ast.WalkContinue, nil
	})
	s.anchors[page] = anchors
	return links, err
}

// pageAnchors returns the anchors of a page, parsing it if it was not yet.
func (s *site) pageAnchors(page string) (map[string]bool, error) {
	if a, ok := s.anchors[page]; ok {
		return a, nil
	}
	if _, err := s.parse(page); err != nil {
		return nil, err
	}
	return s.anchors[page], nil
}

// check returns one line for each link of page that does not resolve.
func (s *site) check(page string) ([]string, error) {
	links, err := s.parse(page)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, l := range links {
		if problem := s.resolve(page, l.dest); problem != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", page, l.line, l.dest, problem))
		}
	}
	return problems, nil
}

// resolve returns why dest, a link on page, does not resolve, or "" when it does (or leaves the
// repository for another site).
func (s *site) resolve(page, dest string) string {
	u, err := url.Parse(dest)
	if err != nil {
		return "not a URL: " + err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return ""
	}
	target := page
	if u.Path != "" {
		if fromRoot, ok := strings.CutPrefix(u.Path, "/"); ok {
			target = path.Clean(fromRoot)
		} else {
			target = path.Join(path.Dir(page), u.Path)
		}
		if target == ".." || strings.HasPrefix(target, "../") {
			return "leaves the repository"
		}
		info, statErr := fs.Stat(s.fsys, target)
		if statErr != nil {
			return "no such file or folder " + target
		}
		if info.IsDir() && u.Fragment != "" {
			return "an anchor into a folder"
		}
	}
	if u.Fragment == "" {
		return ""
	}
	if path.Ext(target) != ".md" {
		return "an anchor into " + target + ", which is not Markdown"
	}
	anchors, err := s.pageAnchors(target)
	if err != nil {
		return err.Error()
	}
	if !anchors[u.Fragment] {
		return fmt.Sprintf("%s has no heading whose anchor is #%s", target, u.Fragment)
	}
	return ""
}

// slugger makes a page's heading anchors as GitHub does: lowercase, letters, digits, '-' and
// '_' kept, each space a '-', every other character dropped; a repeated anchor gets -1, -2…
type slugger struct {
	seen map[string]int
}

func newSlugger() *slugger { return &slugger{seen: map[string]int{}} }

func (s *slugger) slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	slug := base
	for n := s.seen[base]; ; n++ {
		if n > 0 {
			slug = fmt.Sprintf("%s-%d", base, n)
		}
		if _, taken := s.seen[slug]; !taken {
			s.seen[base] = n + 1
			s.seen[slug] = 1
			return slug
		}
	}
}

// plainText is a heading's text as GitHub slugs it: the text of its inline nodes, code spans'
// and links' included, without the Markdown around them.
func plainText(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(source))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return strings.TrimSpace(b.String())
}

// lineOf is the 1-based line of the first text inside n (a link's label), or 0 when it has none.
func lineOf(n ast.Node, source []byte) int {
	line := 0
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			line = 1 + strings.Count(string(source[:t.Segment.Start]), "\n")
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return line
}

// Check the checker: a page with every kind of link, good and broken, in a file system of its own.
func TestResolveFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	fsys := os.DirFS(dir)
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("README.md", "# Top\n\n## Two commands\n\n## `make run`: this machine's metrics\n\n## Two commands\n\n"+
		"[a](docs/guide.md) [b](docs/guide.md#edge-nodes-the-delivery-guarantee) [c](#two-commands-1)\n"+
		"[d](#make-run-this-machines-metrics) [e](https://example.com/x#y) [f](docs) ![g](docs/pic.png)\n"+
		"[h](docs/missing.md) [i](docs/guide.md#no-such-heading) [j](#two-commands-2) [k](../outside.md)\n\n"+
		"| table | [l](docs/guide.md#gone) |\n|---|---|\n| x | [m](/docs/guide.md#über-größe) |\n\n"+
		"[n](docs/pic.png#frag) [o](docs#frag)\n")
	write("docs/guide.md", "# Guide\n\n## Edge nodes: the delivery guarantee\n\n## Über Größe\n")
	write("docs/pic.png", "png")

	problems, err := newSite(fsys).check("README.md")
	require.NoError(t, err)
	assert.Equal(t, []string{
		`README.md:11: link "docs/missing.md": no such file or folder docs/missing.md`,
		`README.md:11: link "docs/guide.md#no-such-heading": docs/guide.md has no heading whose anchor is #no-such-heading`,
		`README.md:11: link "#two-commands-2": README.md has no heading whose anchor is #two-commands-2`,
		`README.md:11: link "../outside.md": leaves the repository`,
		`README.md:13: link "docs/guide.md#gone": docs/guide.md has no heading whose anchor is #gone`,
		`README.md:17: link "docs/pic.png#frag": an anchor into docs/pic.png, which is not Markdown`,
		`README.md:17: link "docs#frag": an anchor into a folder`,
	}, problems)
}

// GitHub's anchors, as its renderer makes them for headings of this repository's shape.
func TestSlug(t *testing.T) {
	s := newSlugger()
	for heading, want := range map[string]string{
		"Edge nodes: the delivery guarantee":         "edge-nodes-the-delivery-guarantee",
		"OTLP straight into Prometheus 3":            "otlp-straight-into-prometheus-3",
		"GPUs allocated through DRA":                 "gpus-allocated-through-dra",
		"dcgm-exporter's generations (dcgm_version)": "dcgm-exporters-generations-dcgm_version",
		"A -- B": "a----b",
	} {
		assert.Equal(t, want, s.slug(heading), heading)
	}
	assert.Equal(t, "x", s.slug("X"))
	assert.Equal(t, "x-1", s.slug("x"))
	assert.Equal(t, "x-2", s.slug("X"))
}
