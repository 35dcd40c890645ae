// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadJobMapping reads a directory as a site's prolog writes it for dcgm-exporter (the files
// of dcgm-exporter's own hpc_test.go, "When all GPU have job files": 0, 1 and the MIG instance 3.0,
// a directory and names it skips), with an epilog's leftovers.
func TestReadJobMapping(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("0", "job1-0\n")
	write("1", "job1-1\njob2-1\n")
	write("3.0", "job3.0-0") // no final newline
	write("4", "")           // the epilog emptied it
	write("5", "  101 \r\n\n102\n")
	write("iamdir.txt", "7\n")
	write("6.", "7\n")
	write("99999999999", "7\n") // past 32 bits
	require.NoError(t, os.Mkdir(filepath.Join(dir, "7"), 0o755))

	jobs, err := ReadJobMapping(dir)
	require.NoError(t, err)
	assert.Equal(t, map[MappingKey][]string{
		{GPU: 0}:                         {"job1-0"},
		{GPU: 1}:                         {"job1-1", "job2-1"},
		{GPU: 3, Instance: 0, MIG: true}: {"job3.0-0"},
		{GPU: 4}:                         nil,
		{GPU: 5}:                         {"101", "102"},
	}, jobs)

	// A directory the prolog has not made yet: no job anywhere, as dcgm-exporter waits for it.
	jobs, err = ReadJobMapping(filepath.Join(dir, "absent"))
	require.NoError(t, err)
	assert.Empty(t, jobs)

	// A file that cannot be read is named; the others are read.
	write("8", strings.Repeat("1\n", maxMappingFile))
	jobs, err = ReadJobMapping(dir)
	require.ErrorContains(t, err, "job-mapping file: ")
	require.ErrorContains(t, err, filepath.Join(dir, "8"))
	assert.Equal(t, []string{"job1-1", "job2-1"}, jobs[MappingKey{GPU: 1}])
	assert.NotContains(t, jobs, MappingKey{GPU: 8})

	_, err = ReadJobMapping(filepath.Join(dir, "0"))
	require.ErrorContains(t, err, "job-mapping directory: ")
}

func FuzzParseMappingName(f *testing.F) {
	for _, s := range []string{"0", "2.0", "3.10", "1.", ".1", "a", "4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k, ok := ParseMappingName(name)
		if !ok {
			if k != (MappingKey{}) {
				t.Fatalf("rejected %q returned %+v", name, k)
			}
			return
		}
		if k.String() != name && !strings.HasPrefix(name, "0") && !strings.Contains(name, ".0") {
			t.Fatalf("%q read as %q", name, k)
		}
	})
}

func FuzzParseMappingFile(f *testing.F) {
	f.Add([]byte("101\n102\n"))
	f.Add([]byte("\r\n  7 \n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, job := range ParseMappingFile(b) {
			if job == "" || job != strings.TrimSpace(job) || strings.ContainsAny(job, "\n") {
				t.Fatalf("%q gave job %q", b, job)
			}
			if !strings.Contains(string(b), job) {
				t.Fatalf("%q gave job %q, not in the file", b, job)
			}
		}
	})
}
