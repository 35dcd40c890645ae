// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// claim is a claim of two devices, a GPU and a MIG device, as NVIDIA's DRA driver writes its spec.
var claim = podresourcestest.NvidiaClaim{
	UID: "6b2f1c9e-0d4e-4c4a-9f3e-2a1b7c8d9e0f", Namespace: "team-a", Name: "gpus", Pool: "node-1",
	Devices: []podresourcestest.NvidiaDevice{{Minor: 3}, {Minor: 5, MIG: &podresourcestest.MIGInstance{GI: 2, CI: 0}}},
}

// staticSpec is a JSON spec in /etc/cdi, as `nvidia-ctk cdi generate` writes one, naming a
// device the claim's spec names too.
const staticSpec = `{"cdiVersion":"0.5.0","kind":"k8s.gpu.nvidia.com/claim","devices":[
  {"name":"6b2f1c9e-0d4e-4c4a-9f3e-2a1b7c8d9e0f-gpu-3","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}},
  {"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}],
 "containerEdits":{"deviceNodes":[{"path":"/dev/nvidiactl"}]}}`

func writeHost(t *testing.T, extra func(root string)) string {
	root := filepath.Join(t.TempDir(), "host")
	file, spec := claim.CDISpec()
	require.NoError(t, hostfixture.Write(root, hostfixture.Host{CgroupVersion: 2, CDISpecs: map[string]string{file: spec}}))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/cdi"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/cdi/nvidia.json"), []byte(staticSpec), 0o600))
	if extra != nil {
		extra(root)
	}
	return root
}

// TestRead: the specs of /etc/cdi and of /var/run/cdi (a link to /run, as on the host: it is
// followed inside the host's root, not into the reader's own /run), each device's nodes, the
// later directory's declaration winning; a broken spec is named and the others still read.
func TestRead(t *testing.T) {
	root := writeHost(t, func(root string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "run/cdi/broken.yaml"), []byte("kind: [\n"), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(root, "run/cdi/README"), []byte("not a spec"), 0o600))
	})
	devices, err := NewReader(root, DefaultSpecDirs).Read()
	require.ErrorContains(t, err, "CDI spec /var/run/cdi/broken.yaml")
	assert.Equal(t, Devices{
		"k8s.gpu.nvidia.com/claim=0":                                          {"/dev/nvidia0"},
		"k8s.gpu.nvidia.com/claim=6b2f1c9e-0d4e-4c4a-9f3e-2a1b7c8d9e0f-gpu-3": {"/dev/nvidia3", "/dev/dri/card4", "/dev/dri/renderD131"},
		"k8s.gpu.nvidia.com/claim=6b2f1c9e-0d4e-4c4a-9f3e-2a1b7c8d9e0f-gpu-5-mig-1g10gb-19-2": {
			"/dev/nvidia5",
			"/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(hostfixture.MIGCapMinor(5, 2, -1)),
			"/dev/nvidia-caps/nvidia-cap" + strconv.Itoa(hostfixture.MIGCapMinor(5, 2, 0)),
		},
	}, devices, "the spec-wide edits (/dev/nvidiactl) are no device's")

	_, err = NewReader(root, []string{"/nonexistent/cdi"}).Read()
	assert.NoError(t, err, "a directory the host lacks declares nothing")
}

// TestReadAgain: a spec is parsed again when it changed, and a removed one is forgotten.
func TestReadAgain(t *testing.T) {
	root := writeHost(t, nil)
	r := NewReader(root, []string{"/etc/cdi"})
	devices, err := r.Read()
	require.NoError(t, err)
	require.Contains(t, devices, "k8s.gpu.nvidia.com/claim=0")

	changed := strings.Replace(staticSpec, `"name":"0"`, `"name":"all"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/cdi/nvidia.json"), []byte(changed), 0o600))
	devices, err = r.Read()
	require.NoError(t, err)
	assert.Contains(t, devices, "k8s.gpu.nvidia.com/claim=all")
	assert.NotContains(t, devices, "k8s.gpu.nvidia.com/claim=0")

	require.NoError(t, os.Remove(filepath.Join(root, "etc/cdi/nvidia.json")))
	devices, err = r.Read()
	require.NoError(t, err)
	assert.Empty(t, devices)
	assert.Empty(t, r.files)
}

// TestBounds: a spec past the size bound is refused unread.
func TestBounds(t *testing.T) {
	root := writeHost(t, func(root string) {
		big := "kind: a.b/c\ndevices: []\n#" + strings.Repeat("x", maxSpecBytes)
		require.NoError(t, os.WriteFile(filepath.Join(root, "etc/cdi/huge.yaml"), []byte(big), 0o600))
	})
	devices, err := NewReader(root, DefaultSpecDirs).Read()
	require.ErrorContains(t, err, "CDI spec /etc/cdi/huge.yaml: ")
	assert.ErrorContains(t, err, "more than 4194304 bytes")
	assert.Len(t, devices, 3, "the other specs are read")
	_, err = Parse([]byte(strings.Repeat(" ", maxSpecBytes+1)), false)
	assert.Error(t, err)
}

func TestParseErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"":                                      "empty",
		"kind: nvidia.com\n":                    `kind "nvidia.com" is not vendor/class`,
		"kind: nvidia.com/gpu=0\n":              `kind "nvidia.com/gpu=0" is not vendor/class`,
		"kind: nvidia.com/gpu\ndevices: [{}]\n": `devices[0]: name "" is not a device name`,
		"kind: nvidia.com/gpu\ndevices: [{name: a=b}]": `devices[0]: name "a=b" is not a device name`,
		"kind: [\n": "yaml",
	} {
		_, err := Parse([]byte(spec), false)
		assert.ErrorContains(t, err, want, "%q", spec)
	}
	_, err := Parse([]byte(`{"kind": 3}`), true)
	assert.ErrorContains(t, err, "cannot unmarshal")
}

// TestResolveIn: links are followed as the host would, inside root.
func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "run/cdi"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var"), 0o755))
	require.NoError(t, os.Symlink("/run", filepath.Join(root, "var/run")))
	require.NoError(t, os.Symlink("../../../../run", filepath.Join(root, "var/up")))
	require.NoError(t, os.Symlink("loop", filepath.Join(root, "var/loop")))
	for path, want := range map[string]string{
		"/var/run/cdi":        "run/cdi",
		"/var/up/cdi":         "run/cdi",
		"/var/../var/run/cdi": "run/cdi",
	} {
		got, err := resolveIn(root, path)
		require.NoError(t, err, path)
		assert.Equal(t, filepath.Join(root, want), got, path)
	}
	_, err := resolveIn(root, "/var/loop/cdi")
	assert.ErrorContains(t, err, "more than 40 symbolic links")
	_, err = resolveIn(root, "/var/none/cdi")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func FuzzParse(f *testing.F) {
	_, spec := claim.CDISpec()
	for _, s := range []string{
		spec, staticSpec, "kind: a/b\n", "kind: a/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}]\n",
		"a: &a [*a, *a]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n", "{", "kind: !!binary AAAA\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	captures, err := filepath.Glob(filepath.Join("testdata", "captures", "*", "*.*"))
	require.NoError(f, err)
	bad, err := filepath.Glob(filepath.Join("testdata", "captures", "*", "*", "*.json"))
	require.NoError(f, err)
	for _, file := range append(captures, bad...) {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data, filepath.Ext(file) == ".json")
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		s, err := Parse(data, isJSON)
		if err != nil {
			return
		}
		vendor, class, ok := strings.Cut(s.Kind, "/")
		if !ok || vendor == "" || class == "" || strings.ContainsAny(class, "/=") {
			t.Fatalf("kind %q accepted", s.Kind)
		}
		for _, d := range s.Devices {
			if d.Name == "" || strings.ContainsAny(d.Name, "/=") {
				t.Fatalf("device name %q accepted", d.Name)
			}
		}
	})
}
