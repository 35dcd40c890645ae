// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"strconv"
	"strings"
)

// visibleDevices is a container's NVIDIA_VISIBLE_DEVICES when it names particular GPUs: indices
// (what minor_number means) or GPU-/MIG- UUIDs.
type visibleDevices []string

// parseVisibleDevices reads NVIDIA_VISIBLE_DEVICES. "all", "none", "void", empty or absent
// allocate no particular GPU; an item that is neither an index nor a UUID is malformed (counted,
// skipped, the others kept).
func parseVisibleDevices(env map[string]string) (devices visibleDevices, malformed int) {
	v := strings.TrimSpace(env["NVIDIA_VISIBLE_DEVICES"])
	switch v {
	case "", "all", "none", "void":
		return nil, 0
	}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if isIndex(item) || isUUID(item) {
			devices = append(devices, item)
		} else {
			malformed++
		}
	}
	return devices, malformed
}

func isIndex(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

func isUUID(s string) bool {
	for _, prefix := range []string{"GPU-", "MIG-"} {
		if rest, ok := strings.CutPrefix(s, prefix); ok && rest != "" {
			return true
		}
	}
	return false
}

// target is a GPU of the batch, whole (mig < 0) or one of its MIG slices.
type target struct{ gpu, mig int }

// deviceIndex finds the target a device id names, in every form the kubelet's device plugins
// and NVIDIA_VISIBLE_DEVICES use: GPU UUIDs, "nvidiaN" device names, indices, MIG UUIDs and the
// time-slicing plugin's replica ids "<id>::<n>"; and MIG devices by their instance ids (migID),
// as a DRA claim's are joined.
type deviceIndex map[string]target

// fill replaces ix's content with the batch's GPUs.
func (ix deviceIndex) fill(gpus []gpuReading) {
	clear(ix)
	for i := range gpus {
		g := &gpus[i]
		whole := target{gpu: i, mig: -1}
		if g.uuid != "" {
			ix[g.uuid] = whole
		}
		ix[g.minor] = whole
		ix["nvidia"+g.minor] = whole
		for j, m := range g.migs {
			ix[m.uuid] = target{gpu: i, mig: j}
			if m.gi != "" && m.ci != "" {
				ix[migID(g.uuid, m.gi, m.ci)] = target{gpu: i, mig: j}
			}
		}
	}
}

func (ix deviceIndex) resolve(id string) (target, bool) {
	id, _, _ = strings.Cut(id, "::")
	t, ok := ix[id]
	return t, ok
}
