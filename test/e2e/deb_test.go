// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/test/stack"
)

// TestSlurmDeb builds the bare-metal .deb (deploy/slurm/build-deb.sh, nfpm) from the built agent
// (and the node check, which build-deb.sh builds),
// installs it with dpkg into a root of its own (the maintainer scripts run, outside a chroot, with
// DPKG_ROOT set, as dpkg runs them for --root), starts the agent as the installed unit's ExecStart
// line says with the installed configuration, scrapes its page, then removes and purges it.
func TestSlurmDeb(t *testing.T) {
	agent := stack.AgentBinary(t)
	out, err := exec.Command(filepath.Join(repoRoot(t), "deploy", "slurm", "build-deb.sh"), agent, t.TempDir()).Output()
	require.NoError(t, err, "build-deb.sh: %s", stderrOf(err))
	deb := strings.TrimSpace(string(out))

	control := t.TempDir()
	output(t, "dpkg-deb", "--control", deb, control)
	fields := string(output(t, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture"))
	assert.Equal(t, "Package: otelcol-gpu-agent\nVersion: 0.1.0\nArchitecture: amd64\n", fields)
	conffiles, err := os.ReadFile(filepath.Join(control, "conffiles"))
	require.NoError(t, err)
	assert.Equal(t, "/etc/otelcol-gpu/agent.yaml\n", string(conffiles), "an edited configuration survives upgrades")
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		info, err := os.Stat(filepath.Join(control, script))
		require.NoError(t, err, script)
		assert.NotZero(t, info.Mode()&0o111, "%s is executable", script)
	}

	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o600))
	dpkg := func(args ...string) {
		t.Helper()
		base := []string{"--root=" + root, "--force-script-chrootless", "--log=/dev/null"}
		if os.Geteuid() != 0 {
			base = append(base, "--force-not-root")
		}
		output(t, "dpkg", append(base, args...)...)
	}
	dpkg("--install", deb)
	status := string(output(t, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "--show", "--showformat=${db:Status-Status} ${Version}", "otelcol-gpu-agent"))
	assert.Equal(t, "installed 0.1.0", status)

	// The node check, for a Slurm prolog (docs/check.md), runs from where the package puts it.
	usage, helpErr := exec.Command(filepath.Join(root, "usr/bin/otelcol-gpu-check"), "-h").CombinedOutput()
	require.NoError(t, helpErr, "otelcol-gpu-check -h: %s", usage)
	assert.Contains(t, string(usage), "Usage: otelcol-gpu-check")

	argv := execStart(t, filepath.Join(root, "lib/systemd/system/otelcol-gpu-agent.service"))
	require.Equal(t, []string{"/usr/bin/otelcol-gpu-agent", "--config=/etc/otelcol-gpu/agent.yaml"}, argv)
	bin := filepath.Join(root, argv[0])
	config := filepath.Join(root, strings.TrimPrefix(argv[1], "--config="))
	port := stack.FreePort(t)
	stack.Start(t, bin, []string{
		"--config=" + config,
		"--set", fmt.Sprintf("exporters::prometheus_page::endpoint=127.0.0.1:%d", port),
		"--set", fmt.Sprintf("extensions::health_check::endpoint=127.0.0.1:%d", stack.FreePort(t)),
		// Two collections a second apart rather than the shipped 30 s.
		"--set", "receivers::task::collection_interval=1s",
	}, nil)
	families := waitForCollections(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), 2)
	for _, name := range []string{"gpu_nvml_up", "collector_iteration_count_total"} {
		assert.Contains(t, families, name)
	}

	// Remove keeps the edited configuration (a conffile); purge takes it.
	dpkg("--remove", "otelcol-gpu-agent")
	assert.NoFileExists(t, bin)
	assert.FileExists(t, config)
	dpkg("--purge", "otelcol-gpu-agent")
	assert.NoFileExists(t, config)
}

// execStart reads a unit file's ExecStart= line as systemd splits it (no quotes or specifiers
// in ours: fields).
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	f, err := os.Open(unit)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
			require.NotContainsf(t, line, `"`, "%s: quoting is not read here", unit)
			return strings.Fields(line)
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s has no ExecStart=", unit)
	return nil
}

// output runs a command that must succeed and returns its output.
func output(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return out
}
