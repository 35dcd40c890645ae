// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package slurm // import "github.com/otelcol-gpu/otelcol-gpu/internal/slurm"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// The job-mapping directory is dcgm-exporter's --hpc-job-mapping-dir (DCGM_HPC_JOB_MAPPING_DIR):
// a site's Slurm prolog writes, for each GPU a job holds, a file named by the GPU's DCGM id ("0")
// or, for a MIG instance, the GPU's id and the GPU instance id ("2.0"), one job id per line, and
// its epilog removes the line or the file. Read here as dcgm-exporter reads it
// (internal/pkg/transformation/hpc.go, NVIDIA/dcgm-exporter at d5e5f510a1b6b393f39a43293ccd9dc985defc79,
// 4.5.3-4.8.2): other names and directories are skipped, every line of a file is a job. Those files
// carry only job ids: no step, user, account, partition or job name, and no process.

// MappingKey names a job-mapping file: a GPU by its DCGM id, or a MIG instance of it.
type MappingKey struct {
	GPU uint
	// Instance is the MIG GPU instance id when MIG is true.
	Instance uint
	MIG      bool
}

func (k MappingKey) String() string {
	if k.MIG {
		return fmt.Sprintf("%d.%d", k.GPU, k.Instance)
	}
	return strconv.FormatUint(uint64(k.GPU), 10)
}

// mappingName is dcgm-exporter's validGPUFile.
var mappingName = regexp.MustCompile(`^\d+(\.\d+)?$`)

// ParseMappingName reads a job-mapping file's name; ok is false for a name dcgm-exporter skips
// (or whose numbers do not fit 32 bits).
func ParseMappingName(name string) (MappingKey, bool) {
	if !mappingName.MatchString(name) {
		return MappingKey{}, false
	}
	gpu, instance, mig := strings.Cut(name, ".")
	var k MappingKey
	n, err := strconv.ParseUint(gpu, 10, 32)
	if err != nil {
		return MappingKey{}, false
	}
	k.GPU = uint(n)
	if mig {
		if n, err = strconv.ParseUint(instance, 10, 32); err != nil {
			return MappingKey{}, false
		}
		k.Instance, k.MIG = uint(n), true
	}
	return k, true
}

// ParseMappingFile reads a job-mapping file's job ids, one a line. dcgm-exporter takes every line
// as it is; here surrounding white space (a prolog's "echo $SLURM_JOB_ID >> file" on a file with
// CRLF endings, a trailing space) is trimmed and blank lines, which dcgm-exporter would turn into
// an empty hpc_job label, are skipped.
func ParseMappingFile(b []byte) []string {
	var jobs []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), len(b)+1)
	for sc.Scan() {
		if job := strings.TrimSpace(sc.Text()); job != "" {
			jobs = append(jobs, job)
		}
	}
	return jobs
}

// maxMappingFile bounds a job-mapping file read: a GPU's file holds the ids of the jobs sharing
// it, a few bytes each.
const maxMappingFile = 1 << 20

// ReadJobMapping reads a job-mapping directory: each GPU or MIG instance with a file, and its job
// ids (an empty file: none). A directory that does not exist is empty (dcgm-exporter waits for it
// the same way). A file that cannot be read is reported in err, naming it, and the others are
// still read.
func ReadJobMapping(dir string) (map[MappingKey][]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[MappingKey][]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job-mapping directory: %w", err)
	}
	jobs := make(map[MappingKey][]string, len(entries))
	var errs []error
	for _, e := range entries {
		key, ok := ParseMappingName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		b, err := hostfile.ReadLimited(filepath.Join(dir, e.Name()), maxMappingFile)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // removed by an epilog since ReadDir
				errs = append(errs, fmt.Errorf("job-mapping file: %w", err))
			}
			continue
		}
		jobs[key] = ParseMappingFile(b)
	}
	return jobs, errors.Join(errs...)
}
