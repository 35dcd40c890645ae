// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// visibleDevices are the GPUs a container's environment names, by the allocation source whose
// variables name them: ids the deviceIndex resolves (minor numbers, UUIDs).
type visibleDevices map[Source][]string

// environmentSources read, each, the variables of one allocation source that name a container's
// GPUs: the ids they give, and how many items were malformed (counted, skipped, the others kept).
var environmentSources = []struct {
	source Source
	read   func(env map[string]string) (ids []string, malformed int)
}{
	{SourceNvidiaVisibleDevices, nvidiaVisibleDevices},
	{SourceAMDVisibleDevices, amdVisibleDevices},
}

// readVisibleDevices reads every environment source's variables; malformed counts each one's
// malformed items.
func readVisibleDevices(env map[string]string) (visible visibleDevices, malformed map[Source]int) {
	for _, es := range environmentSources {
		ids, bad := es.read(env)
		if len(ids) > 0 {
			if visible == nil {
				visible = visibleDevices{}
			}
			visible[es.source] = ids
		}
		if bad > 0 {
			if malformed == nil {
				malformed = map[Source]int{}
			}
			malformed[es.source] = bad
		}
	}
	return visible, malformed
}

// nvidiaVisibleDevices reads NVIDIA_VISIBLE_DEVICES: indices (the container toolkit's, NVML's:
// what minor_number means) or GPU-/MIG- UUIDs. "all", "none", "void", empty or absent allocate
// no particular GPU.
func nvidiaVisibleDevices(env map[string]string) ([]string, int) {
	v := strings.TrimSpace(env["NVIDIA_VISIBLE_DEVICES"])
	switch v {
	case "all", "none", "void":
		return nil, 0
	}
	return deviceList(v, func(item string) (string, bool) {
		return item, isIndex(item) || hasIDPrefix(item, "GPU-", "MIG-")
	})
}

// amdVisibleDevices reads the variables an AMD job may carry. OpenPAI's runtime sets
// PAI_AMD_VISIBLE_DEVICES to the minor numbers of the host's GPUs it gave the job: when set, it
// decides. ROCm's runtimes expose the GPUs ROCR_VISIBLE_DEVICES names, then those of them
// HIP_VISIBLE_DEVICES names; an index of either counts the GPUs the process can open (in a
// device plugin's container, only the container's own), which the node cannot tell, so only
// UUIDs are taken, and HIP's indices into a ROCR list of UUIDs only. UUIDs are GPU-<hex>, the
// hex matched without regard to case (rocminfo writes it lowercase, as the gpu receiver does).
func amdVisibleDevices(env map[string]string) (ids []string, malformed int) {
	if v := strings.TrimSpace(env["PAI_AMD_VISIBLE_DEVICES"]); v != "" {
		return deviceList(v, func(item string) (string, bool) { return item, isIndex(item) })
	}
	rocr, badROCR := deviceList(env["ROCR_VISIBLE_DEVICES"], rocmDevice)
	hip, badHIP := deviceList(env["HIP_VISIBLE_DEVICES"], rocmDevice)
	malformed = badROCR + badHIP
	// exposedKnown: ROCR names every GPU it exposes by UUID, so HIP's indices count them.
	exposedKnown := len(rocr) > 0 && !slices.ContainsFunc(rocr, isIndex)
	if strings.TrimSpace(env["HIP_VISIBLE_DEVICES"]) == "" {
		return slices.DeleteFunc(rocr, isIndex), malformed
	}
	for _, item := range hip {
		switch {
		case !isIndex(item):
			if !exposedKnown || slices.Contains(rocr, item) {
				ids = append(ids, item)
			}
		case exposedKnown:
			if i, _ := strconv.Atoi(item); i < len(rocr) {
				ids = append(ids, rocr[i])
			}
		}
	}
	return ids, malformed
}

// rocmDevice accepts an index or a GPU-<hex> UUID of ROCm's variables, the UUID in the gpu
// receiver's lowercase form.
func rocmDevice(item string) (string, bool) {
	if hex, ok := strings.CutPrefix(item, "GPU-"); ok && hex != "" {
		return "GPU-" + strings.ToLower(hex), true
	}
	return item, isIndex(item)
}

// deviceList splits a comma-separated list of devices: wellFormed says whether an item is one,
// and in which form it is kept; the others are counted. A blank list names none.
func deviceList(v string, wellFormed func(item string) (string, bool)) (items []string, malformed int) {
	if strings.TrimSpace(v) == "" {
		return nil, 0
	}
	for item := range strings.SplitSeq(v, ",") {
		if id, ok := wellFormed(strings.TrimSpace(item)); ok {
			items = append(items, id)
		} else {
			malformed++
		}
	}
	return items, malformed
}

func isIndex(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

// hasIDPrefix: s is one of prefixes followed by something.
func hasIDPrefix(s string, prefixes ...string) bool {
	for _, prefix := range prefixes {
		if rest, ok := strings.CutPrefix(s, prefix); ok && rest != "" {
			return true
		}
	}
	return false
}

// target is a GPU of the batch, whole (mig < 0) or one of its MIG slices.
type target struct{ gpu, mig int }

// deviceIndex finds the target a device id names, in every form the kubelet's device plugins
// and the environment use: GPU UUIDs, "nvidiaN" device names, indices, MIG UUIDs and the
// time-slicing plugin's replica ids "<id>::<n>"; ROCm's device plugin's PCI addresses (whole
// GPUs) and partition devices (amdgpu_xcp_N); and MIG devices by their instance ids (migID),
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
		// A partition shares its GPU's PCI address: only its partition device names it.
		if g.partitionDevice != "" {
			ix[kernelDeviceName(g.partitionDevice)] = whole
		} else if addr, ok := pciAddress(g.pciBusID); ok {
			ix[addr] = whole
		}
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
	if t, ok := ix[id]; ok {
		return t, true
	}
	t, ok := ix[kernelDeviceName(id)]
	return t, ok
}

// kernelDeviceName is a device name as the kernel writes it: a PCI address in its form, any
// other name as it is.
func kernelDeviceName(name string) string {
	if addr, ok := pciAddress(name); ok {
		return addr
	}
	return name
}

// pciAddress writes a PCI address (domain:bus:device.function, hexadecimal) as the kernel does,
// 0000:c1:00.0, whatever the case and the domain's width (NVML writes 00000000:C1:00.0).
func pciAddress(s string) (string, bool) {
	domain, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", false
	}
	device, function, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	fields := []struct {
		text string
		bits int
	}{{domain, 32}, {bus, 8}, {device, 5}, {function, 3}}
	var v [4]uint64
	for i, f := range fields {
		if f.text == "" || len(f.text) > 8 {
			return "", false
		}
		n, err := strconv.ParseUint(f.text, 16, f.bits)
		if err != nil {
			return "", false
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), true
}
