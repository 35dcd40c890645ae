// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"errors"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/cdi"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
)

// DRA allocations: pod-resources names a claim's devices by driver, pool and device name, and
// by the CDI devices the driver injects for them, never by GPU UUID. The join is node-local:
// the node's CDI specs say which device nodes each CDI device injects, and the NVIDIA driver's
// /proc files which GPU a /dev/nvidia<minor> is and which MIG instance a
// /dev/nvidia-caps/nvidia-cap<minor>. These are what the container actually got, whatever the
// driver names its devices; and they need no read access to the cluster's ResourceSlices, which
// RBAC cannot limit to a node's own.

// draSettings say which claims' devices are GPUs and where the node's CDI specs are.
type draSettings struct {
	drivers     []string
	cdiSpecDirs []string
}

// gpuDriver tells whether a DRA driver's devices are GPUs; none are when DRA is not read (d nil).
func (d *draSettings) gpuDriver(name string) bool {
	return d != nil && slices.Contains(d.drivers, name)
}

// gpuDevices is one refresh's reading of what joins a CDI device to a GPU.
type gpuDevices struct {
	cdi    cdi.Devices
	driver nvidiaDriver
	err    error // what could not be read, for the log
}

// claimDevice is the GPUs (UUIDs) or MIG devices (migID) behind a claimed device: every GPU
// behind the CDI devices pod-resources lists with it. ok is false when one of them is not
// joined: the device's GPU is then unknown, not guessed.
func (g *gpuDevices) claimDevice(d podresources.ClaimDevice) (ids []string, ok bool) {
	if g == nil || len(d.CDIDevices) == 0 {
		return nil, false
	}
	for _, name := range d.CDIDevices {
		got, ok := g.cdiDevice(name)
		if !ok {
			return nil, false
		}
		for _, id := range got {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, true
}

// cdiDevice reads a CDI device's nodes: a MIG device's compute instance capabilities name it
// (its parent's /dev/nvidia<minor> comes with them and is not the whole GPU); without
// capabilities, each /dev/nvidia<minor> is a whole GPU. Other nodes (/dev/dri/*) say nothing.
func (g *gpuDevices) cdiDevice(name string) ([]string, bool) {
	nodes, ok := g.cdi[name]
	if !ok {
		return nil, false
	}
	var gpus, migs []string
	capabilities := false
	for _, path := range nodes {
		var minor int
		switch {
		case numbered(path, "/dev/nvidia-caps/nvidia-cap", &minor):
			capabilities = true
			c, ok := g.driver.migCaps[minor]
			uuid, known := g.driver.uuids[c.gpu]
			if !ok || !known {
				return nil, false
			}
			if c.ci >= 0 {
				migs = append(migs, migID(uuid, strconv.Itoa(c.gi), strconv.Itoa(c.ci)))
			}
		case numbered(path, "/dev/nvidia", &minor):
			uuid, ok := g.driver.uuids[minor]
			if !ok {
				return nil, false
			}
			gpus = append(gpus, uuid)
		}
	}
	if capabilities {
		return migs, len(migs) > 0
	}
	return gpus, len(gpus) > 0
}

// migID names a MIG device by its parent GPU and its GPU and compute instance ids, as both the
// driver's files and the gpu receiver's MIG series tell them.
func migID(parentUUID, gi, ci string) string {
	return parentUUID + "/gi" + gi + "/ci" + ci
}

// readGPUDevices reads what joins claimed devices to GPUs, when the kubelet's answer has a
// device of a GPU driver. What could not be read shows as devices countUnjoined counts.
func (n *node) readGPUDevices(kube *podresources.Snapshot) *gpuDevices {
	if !n.claimsGPUs(kube) {
		return nil
	}
	g := &gpuDevices{}
	var specsErr, driverErr error
	g.cdi, specsErr = n.cdi.Read()
	g.driver, driverErr = readNvidiaDriver(n.set.root)
	g.err = errors.Join(specsErr, driverErr)
	return g
}

// countUnjoined counts the claimed devices of the node's containers that inv does not join to
// a GPU, once a refresh while it lasts, and logs when that starts and ends. Claims of
// containers the node does not run are not counted: the kubelet lists a finished pod's claims
// for a while after its driver removed their CDI specs.
func (n *node) countUnjoined(kube *podresources.Snapshot, inv *inventory) {
	if kube == nil {
		return
	}
	// A claim several containers use is listed under each: its devices count once.
	unjoined := map[string]bool{}
	for key, claims := range kube.Claims {
		if inv.byName[key] == nil {
			continue
		}
		for _, c := range claims {
			for _, d := range c.Devices {
				if !n.set.dra.gpuDriver(d.Driver) {
					continue
				}
				if _, ok := inv.gpuDevices.claimDevice(d); !ok {
					unjoined[c.Namespace+"/"+c.Name+": "+d.Device] = true
				}
			}
		}
	}
	n.draErrors.Add(int64(len(unjoined)))
	switch {
	case len(unjoined) > 0 && !n.draFailing:
		n.draFailing = true
		var reason error
		if inv.gpuDevices != nil {
			reason = inv.gpuDevices.err
		}
		n.set.logger.Warn("DRA devices are not joined to GPUs through the node's CDI specs and NVIDIA driver files: their GPUs come from the next source",
			zap.Strings("claimed_devices", slices.Sorted(maps.Keys(unjoined))), zap.Strings("cdi_spec_dirs", n.set.dra.cdiSpecDirs), zap.Error(reason))
	case len(unjoined) == 0 && n.draFailing:
		n.draFailing = false
		n.set.logger.Info("DRA devices are joined to GPUs again")
	}
}

// claimsGPUs tells whether the kubelet's answer has a device of a GPU driver.
func (n *node) claimsGPUs(kube *podresources.Snapshot) bool {
	if kube == nil {
		return false
	}
	for _, claims := range kube.Claims {
		for _, c := range claims {
			for _, d := range c.Devices {
				if n.set.dra.gpuDriver(d.Driver) {
					return true
				}
			}
		}
	}
	return false
}

// claimDRA claims the targets of each container's DRA claims, as pod_resources' own. A claimed
// device that the node does not join to a GPU has an unknown GPU: left to the next source, but
// any GPU another claim of the same device was joined to (a device shared through share_id, a
// claim several pods use) is undecidable, as deciding it on the holders found would give them
// the missing one's share.
func (p *gpuAttribution) claimDRA(kube *podresources.Snapshot, inv *inventory, devs deviceIndex, isAlive func(*container) bool, undecidable []bool, claim func(target, *container, claimRef)) {
	type deviceKey struct{ driver, pool, device string }
	joined := map[deviceKey][]int{}
	var unjoined []deviceKey
	for key, claims := range kube.Claims {
		c := inv.byName[key]
		if c != nil && !isAlive(c) {
			continue
		}
		for _, cl := range claims {
			for _, d := range cl.Devices {
				if !p.node.set.dra.gpuDriver(d.Driver) {
					continue
				}
				k := deviceKey{d.Driver, d.Pool, d.Device}
				ids, ok := inv.gpuDevices.claimDevice(d)
				if !ok {
					unjoined = append(unjoined, k)
					continue
				}
				for _, id := range ids {
					t, ok := devs.resolve(id)
					if !ok {
						continue
					}
					joined[k] = append(joined[k], t.gpu)
					if c == nil {
						undecidable[t.gpu] = true
					} else {
						claim(t, c, claimRef{namespace: cl.Namespace, name: cl.Name})
					}
				}
			}
		}
	}
	for _, k := range unjoined {
		for _, gpu := range joined[k] {
			undecidable[gpu] = true
		}
	}
}
