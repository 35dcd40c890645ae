// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package podlogs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
)

const (
	uidA = "0b2f5a1e-0000-4000-8000-00000000000a"
	uidB = "0b2f5a1e-0000-4000-8000-00000000000b"
	uidC = "0b2f5a1e-0000-4000-8000-00000000000c"
	idA  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB  = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idC  = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	// sandboxC is pod C's pause container: the kubelet writes no logs for a sandbox.
	sandboxC = "0ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func layout(t *testing.T) string {
	root := t.TempDir()
	mk := func(rel string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, rel), 0o755))
	}
	link := func(name, target string) {
		require.NoError(t, os.Symlink(target, filepath.Join(root, "var/log/containers", name)))
	}
	mk("var/log/pods/team-a_train-0_" + uidA + "/trainer")
	mk("var/log/pods/team-a_train-0_" + uidA + "/log-shipper")
	mk("var/log/pods/team-b_notebook_" + uidB + "/jupyter")
	mk("var/log/pods/team-c_infer_" + uidC + "/server")
	mk("var/log/pods/not-a-pod-dir")
	mk("var/log/containers")
	link("train-0_team-a_trainer-"+idA+".log", "/var/log/pods/team-a_train-0_"+uidA+"/trainer/0.log")
	link("train-0_team-a_log-shipper-cccc.log", "/var/log/pods/team-b_other_"+uidB+"/log-shipper/0.log") // names disagree
	link("infer_team-c_server-"+idC+".log", "/var/log/pods/team-c_infer_"+uidC+"/server/0.log")
	link("garbage.log", "/nowhere")
	return root
}

func TestRead(t *testing.T) {
	ix, err := Read(layout(t))
	require.NoError(t, err)

	assert.True(t, ix.Present())
	p, ok := ix.PodByUID(uidA)
	require.True(t, ok)
	assert.Equal(t, Pod{Namespace: "team-a", Name: "train-0", UID: uidA}, p)
	assert.Equal(t, "trainer", ix.ContainerName(uidA, idA), "from the /var/log/containers link")
	assert.Empty(t, ix.ContainerName(uidA, idB), "two containers and no link: not guessed")
	assert.Equal(t, "jupyter", ix.ContainerName(uidB, idB), "the pod's only container")
	assert.Empty(t, ix.ContainerName(uidB, idA), "a container id of another pod")
	assert.Empty(t, ix.ContainerName(uidA, "cccc"), "a link whose names disagree is skipped")
	assert.Equal(t, "server", ix.ContainerName(uidC, idC))
	assert.Empty(t, ix.ContainerName(uidC, sandboxC), "the only container has its link: another id of the pod is not it")
	_, ok = ix.PodByUID("no-such-uid")
	assert.False(t, ok)
}

func TestReadWithoutKubelet(t *testing.T) {
	ix, err := Read(t.TempDir())
	require.NoError(t, err, "a node without the layout is not an error")
	assert.False(t, ix.Present())
	_, ok := ix.PodByUID(uidA)
	assert.False(t, ok)
}

func TestCacheRereadsAfterMaxAge(t *testing.T) {
	root := layout(t)
	clk := clock.NewFake(time.Unix(1000, 0))
	c := &Cache{root: root, maxAge: 10 * time.Second, clock: clk}
	ix, err := c.Get()
	require.NoError(t, err)
	_, ok := ix.PodByUID(uidB)
	require.True(t, ok)

	require.NoError(t, os.RemoveAll(filepath.Join(root, "var/log/pods/team-b_notebook_"+uidB)))
	ix, _ = c.Get()
	_, ok = ix.PodByUID(uidB)
	assert.True(t, ok, "within maxAge the cached index answers")
	clk.Advance(10 * time.Second)
	ix, _ = c.Get()
	_, ok = ix.PodByUID(uidB)
	assert.False(t, ok, "the pod's directory is gone")
}

func TestShared(t *testing.T) {
	a, releaseA := Shared("/host/")
	b, releaseB := Shared("/host")
	assert.Same(t, a, b)
	releaseA()
	releaseB()
	assert.Equal(t, 0, shared.Len())
}

func FuzzParseContainerLink(f *testing.F) {
	f.Add("train-0_team-a_trainer-"+idA+".log", "/var/log/pods/team-a_train-0_"+uidA+"/trainer/0.log")
	f.Add("_-.log", "/_/_/")
	f.Fuzz(func(t *testing.T, name, target string) {
		c, id, ok := ParseContainerLink(name, target)
		if !ok {
			return
		}
		if id == "" || c.Name == "" || c.Pod.UID == "" || strings.Contains(c.Pod.Namespace, "_") {
			t.Fatalf("accepted %q -> %q as %+v id %q", name, target, c, id)
		}
	})
}

func FuzzParsePodDir(f *testing.F) {
	f.Add("team-a_train-0_" + uidA)
	f.Add("a__b")
	f.Fuzz(func(t *testing.T, name string) {
		p, ok := ParsePodDir(name)
		if ok && p.Namespace+"_"+p.Name+"_"+p.UID != name {
			t.Fatalf("%q parsed as %+v", name, p)
		}
	})
}
