// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"
)

// The NVIDIA kernel driver's files that say which GPU a device node is: the same files the NVIDIA
// Container Toolkit reads to build the CDI specs that inject those nodes.
const (
	// gpusDir has a directory per GPU whose information file gives its UUID and device minor
	// (/dev/nvidia<minor>).
	gpusDir = "proc/driver/nvidia/gpus"
	// migMinorsFile lists the minor of /dev/nvidia-caps/nvidia-cap<minor> of every MIG GPU and
	// compute instance the driver can make: "gpu<minor>/gi<gi>/access <cap minor>",
	// "gpu<minor>/gi<gi>/ci<ci>/access <cap minor>".
	migMinorsFile = "proc/driver/nvidia-caps/mig-minors"

	// maxInformationBytes bounds a GPU's information file (a few hundred bytes).
	maxInformationBytes = 64 << 10
	// maxMIGMinorsBytes bounds mig-minors: about 30 kB for 8 GPUs, 135 lines each.
	maxMIGMinorsBytes = 1 << 20
	// maxGPUs bounds the GPU directories read.
	maxGPUs = 1024
)

// migCap is the MIG instance a capability device names: compute instance ci of GPU instance gi of
// the GPU of /dev/nvidia<gpu>; ci < 0 for the GPU instance's own capability.
type migCap struct{ gpu, gi, ci int }

// nvidiaDriver is what the driver's files say of the node's GPUs.
type nvidiaDriver struct {
	uuids   map[int]string // GPU UUID by /dev/nvidia minor
	migCaps map[int]migCap // by /dev/nvidia-caps/nvidia-cap minor
}

// readNvidiaDriver reads the driver's files under root. What it could read is returned with the
// errors: a GPU whose file is unreadable only fails the joins to that GPU.
func readNvidiaDriver(root string) (nvidiaDriver, error) {
	d := nvidiaDriver{uuids: map[int]string{}, migCaps: map[int]migCap{}}
	var errs []error
	entries, err := os.ReadDir(filepath.Join(root, gpusDir))
	if err != nil {
		errs = append(errs, err)
	}
	if len(entries) > maxGPUs {
		errs = append(errs, fmt.Errorf("/%s: more than %d GPUs, the others not read", gpusDir, maxGPUs))
		entries = entries[:maxGPUs]
	}
	for _, e := range entries {
		path := filepath.Join(gpusDir, e.Name(), "information")
		minor, uuid, readErr := readInformation(filepath.Join(root, path))
		if readErr != nil {
			errs = append(errs, fmt.Errorf("/%s: %w", path, readErr))
			continue
		}
		d.uuids[minor] = uuid
	}
	data, err := hostfile.ReadLimited(filepath.Join(root, migMinorsFile), maxMIGMinorsBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A driver without MIG support: no MIG device can be claimed.
	case err != nil:
		errs = append(errs, fmt.Errorf("/%s: %w", migMinorsFile, err))
	default:
		d.migCaps = parseMIGMinors(data)
	}
	return d, errors.Join(errs...)
}

func readInformation(path string) (minor int, uuid string, err error) {
	data, err := hostfile.ReadLimited(path, maxInformationBytes)
	if err != nil {
		return 0, "", err
	}
	return parseInformation(data)
}

// parseInformation reads a GPU's UUID and device minor from its information file: "Key: value"
// lines, the value after tabs and spaces.
func parseInformation(data []byte) (minor int, uuid string, err error) {
	minor = -1
	for line := range bytes.Lines(data) {
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch string(bytes.TrimSpace(key)) {
		case "GPU UUID":
			uuid = string(value)
		case "Device Minor":
			if minor, err = strconv.Atoi(string(value)); err != nil || minor < 0 {
				return 0, "", fmt.Errorf("device minor %q", value)
			}
		}
	}
	if !strings.HasPrefix(uuid, "GPU-") || minor < 0 {
		return 0, "", errors.New("no GPU UUID and device minor")
	}
	return minor, uuid, nil
}

// parseMIGMinors reads mig-minors; lines of other capabilities (config, monitor) and malformed
// ones name no instance and are skipped.
func parseMIGMinors(data []byte) map[int]migCap {
	caps := map[int]migCap{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		path, minorText, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		minor, err := strconv.Atoi(minorText)
		if err != nil || minor < 0 {
			continue
		}
		if c, ok := parseMIGCap(path); ok {
			caps[minor] = c
		}
	}
	return caps
}

// parseMIGCap reads gpu<g>/gi<i>/access or gpu<g>/gi<i>/ci<c>/access.
func parseMIGCap(path string) (migCap, bool) {
	parts := strings.Split(path, "/")
	if len(parts) < 3 || len(parts) > 4 || parts[len(parts)-1] != "access" {
		return migCap{}, false
	}
	c := migCap{ci: -1}
	ok := numbered(parts[0], "gpu", &c.gpu) && numbered(parts[1], "gi", &c.gi)
	if len(parts) == 4 {
		ok = ok && numbered(parts[2], "ci", &c.ci)
	}
	return c, ok
}

// numbered reads <prefix><n>, n a decimal number.
func numbered(s, prefix string, n *int) bool {
	digits, ok := strings.CutPrefix(s, prefix)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return false
	}
	v, err := strconv.Atoi(digits)
	*n = v
	return err == nil
}
