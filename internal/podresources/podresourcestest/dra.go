// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package podresourcestest // import "github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
)

// What NVIDIA's DRA driver leaves on a node (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
// NVIDIA/k8s-dra-driver-gpu, read at 9593204, cmd/gpu-kubelet-plugin): driver gpu.nvidia.com,
// one pool per node named after it, devices gpu-<minor> (the /dev/nvidia<minor> minor, not
// NVML's index) and gpu-<parent minor>-mig-<profile>-<profile id>-<placement start>; for each
// claim it prepares, a CDI spec /var/run/cdi/k8s.gpu.nvidia.com-claim_<claim uid>.yaml whose
// devices, <claim uid>-<device>, inject the GPU's /dev/nvidia<minor> (a MIG device's parent's
// and its GPU and compute instances' /dev/nvidia-caps/nvidia-cap<minor>). Neither the ResourceSlice
// names nor the spec carry the GPU's UUID (the ResourceSlice's uuid attribute does).
const (
	// NvidiaDriver is the driver's name.
	NvidiaDriver  = "gpu.nvidia.com"
	nvidiaCDIKind = "k8s.gpu.nvidia.com/claim"
)

// NvidiaClaim is a ResourceClaim that NVIDIA's DRA driver prepared on a node.
type NvidiaClaim struct {
	UID, Namespace, Name string
	// Pool is the driver's pool: the node's name.
	Pool    string
	Devices []NvidiaDevice
}

// NvidiaDevice is a device of a claim: a whole GPU or a MIG device of one.
type NvidiaDevice struct {
	// Minor is the GPU's /dev/nvidia<minor>, a MIG device's parent's.
	Minor int
	// MIG is the MIG device's GPU and compute instance; nil for the whole GPU.
	MIG *MIGInstance
	// ShareID is set when the device is shared with other claims (DRA's consumable capacity).
	ShareID string
}

// MIGInstance names a MIG device on its GPU.
type MIGInstance struct{ GI, CI int }

// Name is the device's name in the driver's ResourceSlice. A MIG device's name tells its profile
// and placement, not its instance ids: only its CDI spec's device nodes say which it is.
func (d NvidiaDevice) Name() string {
	if d.MIG == nil {
		return fmt.Sprintf("gpu-%d", d.Minor)
	}
	return fmt.Sprintf("gpu-%d-mig-1g10gb-19-%d", d.Minor, d.MIG.GI)
}

func (c NvidiaClaim) cdiDevice(d NvidiaDevice) string {
	return c.UID + "-" + d.Name()
}

// Resource is the claim as pod-resources lists it for a container that uses it. As the kubelet
// does (pkg/kubelet/cm GetDynamicResources, kubernetes 9efa0b0), each device carries the CDI
// devices of the claim's devices before it too.
func (c NvidiaClaim) Resource() *v1.DynamicResource {
	r := &v1.DynamicResource{ClaimName: c.Name, ClaimNamespace: c.Namespace}
	var cdi []*v1.CDIDevice
	for _, d := range c.Devices {
		cdi = append(cdi, &v1.CDIDevice{Name: nvidiaCDIKind + "=" + c.cdiDevice(d)})
		res := &v1.ClaimResource{CdiDevices: slices.Clone(cdi), DriverName: NvidiaDriver, PoolName: c.Pool, DeviceName: d.Name()}
		if d.ShareID != "" {
			res.ShareId = &d.ShareID
		}
		r.ClaimResources = append(r.ClaimResources, res)
	}
	return r
}

// CDISpec is the spec file the driver writes for the claim (for hostfixture.Host.CDISpecs): its
// devices, and the edits common to them as the NVIDIA Container Toolkit generates them.
func (c NvidiaClaim) CDISpec() (file, content string) {
	var b strings.Builder
	b.WriteString("---\ncdiVersion: 0.5.0\nkind: " + nvidiaCDIKind + "\ndevices:\n")
	for _, d := range c.Devices {
		fmt.Fprintf(&b, "- name: %s\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia%d\n", c.cdiDevice(d), d.Minor)
		if d.MIG != nil {
			for _, ci := range []int{-1, d.MIG.CI} {
				fmt.Fprintf(&b, "    - path: /dev/nvidia-caps/nvidia-cap%d\n      type: c\n      major: 236\n      minor: %[1]d\n      fileMode: 292\n",
					hostfixture.MIGCapMinor(d.Minor, d.MIG.GI, ci))
			}
		} else {
			fmt.Fprintf(&b, "    - path: /dev/dri/card%d\n    - path: /dev/dri/renderD%d\n", d.Minor+1, 128+d.Minor)
		}
		b.WriteString("    hooks:\n    - hookName: createContainer\n      path: /usr/bin/nvidia-cdi-hook\n      args: [nvidia-cdi-hook, chmod, --mode, \"755\", --path, /dev/dri]\n")
	}
	b.WriteString(`containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidia-modeset
  - path: /dev/nvidia-uvm
  - path: /dev/nvidia-uvm-tools
  - path: /dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15
    options: [ro, nosuid, nodev, bind]
  - hostPath: /usr/bin/nvidia-smi
    containerPath: /usr/bin/nvidia-smi
    options: [ro, nosuid, nodev, bind]
`)
	return "k8s.gpu.nvidia.com-claim_" + c.UID + ".yaml", b.String()
}

// WithClaims adds DRA claims to a container's entry, which may hold device-plugin devices too.
func WithClaims(c *v1.ContainerResources, claims ...*v1.DynamicResource) *v1.ContainerResources {
	c.DynamicResources = append(c.DynamicResources, claims...)
	return c
}
