// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package demonode lays out the Kubernetes node behind `make demo`'s simulated GPUs, so the demo
// runs through the production code paths: a /proc + cgroup tree (cgroup v2, systemd driver,
// containerd) holding the demo jobs' containers, each pod's sandbox beside them, and their
// processes, with the pids the simulated GPUs report, the kubelet's log layout naming their
// pods, and a real pod-resources gRPC server on a unix socket handing out the GPUs, through
// device plugins or through DRA claims of NVIDIA's DRA driver (whose CDI specs, and the NVIDIA
// driver's /proc files, are on the tree too). Pods and their devices come from a pods file
// beside the GPU scenario. The GPUs' identities come from the scenario (ScenarioGPUs): an
// NVIDIA GPU's UUID, MIG UUIDs and PCI address as internal/gpuscenario derives them or its
// capture records them; an AMD node's GPUs, as amdgpufixture writes them, are handed out by
// ROCm's device plugin under amd.com/gpu by their PCI addresses, and the node has no NVIDIA
// driver files.
package demonode // import "github.com/otelcol-gpu/otelcol-gpu/internal/demonode"

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/amdgpu/amdgpufixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
)

// Pods is the content of a pods file (distro/scenarios/pods/*.yaml).
type Pods struct {
	Pods []Pod `yaml:"pods"`
	// HostProcesses run outside any container (GPU processes there are external).
	HostProcesses []HostProcess `yaml:"host_processes"`
}

// Pod states: what the kubelet still knows of the pod.
const (
	StateRunning  = "running"  // listed by pod-resources, logs kept
	StateFinished = "finished" // not listed, logs kept: a container still running is a zombie
	StateGone     = "gone"     // neither: a container still running is a zombie
)

// Pod is one pod of the demo node.
type Pod struct {
	Namespace  string      `yaml:"namespace"`
	Name       string      `yaml:"name"`
	State      string      `yaml:"state"`
	Containers []Container `yaml:"containers"`
}

// Container is one of a pod's containers.
type Container struct {
	Name    string            `yaml:"name"`
	Env     map[string]string `yaml:"env"`
	PIDs    []int             `yaml:"pids"`
	Devices []Devices         `yaml:"devices"`
	Claims  []Claim           `yaml:"claims"`
}

// Devices are what the kubelet gave a container of one resource. IDs name the scenario's GPUs:
// "gpu:N" (its UUID, or an AMD GPU's PCI address), "gpu:N::R" (time-slicing replica R of it),
// "mig:N:I" (slice I of GPU N).
type Devices struct {
	Resource string   `yaml:"resource"`
	IDs      []string `yaml:"ids"`
}

// Claim is a ResourceClaim that NVIDIA's DRA driver prepared for a container: the kubelet lists
// it under dynamic_resources and the driver's CDI spec for it is on the node. Name is the
// claim's; for a pod that asked for nvidia.com/gpu where the DRA driver serves it (Kubernetes
// 1.37), the scheduler's, <pod>-extended-resources-<suffix>. Devices name whole GPUs of the
// scenario, "gpu:N".
type Claim struct {
	Name    string   `yaml:"name"`
	Devices []string `yaml:"devices"`
}

// HostProcess is a process outside any container.
type HostProcess struct {
	PID  int    `yaml:"pid"`
	Comm string `yaml:"comm"`
}

// LoadPods reads a pods file strictly.
func LoadPods(path string) (*Pods, error) {
	var p Pods
	if err := decodeStrict(path, &p); err != nil {
		return nil, err
	}
	for i, pod := range p.Pods {
		if !slices.Contains([]string{StateRunning, StateFinished, StateGone}, pod.State) {
			return nil, fmt.Errorf("%s: pods[%d]: state must be running, finished or gone, got %q", path, i, pod.State)
		}
	}
	return &p, nil
}

// GPU is the identity of one of the node's GPUs: what its device plugin hands out.
type GPU struct {
	UUID string
	MIG  []string // MIG UUIDs in slice order
	// PCIAddress is an AMD GPU's (0000:05:00.0), by which ROCm's device plugin hands it out;
	// empty on an NVIDIA GPU.
	PCIAddress string
	// NvidiaBusID is an NVIDIA GPU's PCI address (0000:01:00.0), as the driver's /proc files
	// name it; empty: bus index+1 in domain 0.
	NvidiaBusID string
}

// ScenarioGPUs are the GPUs of a scenario, by index, as their device plugins hand them out;
// for an AMD scenario also what writes its GPUs' files.
func ScenarioGPUs(sc *gpuscenario.Scenario) (map[int]GPU, *amdgpufixture.Player, error) {
	if sc.Vendor() == gpuscenario.AMD {
		player, err := amdgpufixture.NewPlayer(sc)
		if err != nil {
			return nil, nil, err
		}
		return AMDGPUs(player.Node(0)), player, nil
	}
	gpus := map[int]GPU{}
	for i := range sc.GPUs {
		gpus[i] = GPU{UUID: sc.UUID(i), MIG: sc.MIGUUIDs(i), NvidiaBusID: sc.PCIAddress(i).String()}
	}
	return gpus, nil, nil
}

// AMDGPUs are the GPUs of an AMD node's files, by index, as ROCm's device plugin hands them out.
func AMDGPUs(n amdgpufixture.Node) map[int]GPU {
	gpus := map[int]GPU{}
	for i := range n.GPUs {
		gpus[i] = GPU{UUID: fmt.Sprintf("GPU-%016x", n.GPUs[i].UniqueID), PCIAddress: n.GPUs[i].PCIAddress}
	}
	return gpus
}

// Node is a started demo node.
type Node struct {
	Root    string
	kubelet *podresourcestest.Server
}

// Socket is where the node's kubelet serves pod-resources, the default under Root.
func Socket(root string) string {
	return filepath.Join(root, "var", "lib", "kubelet", "pod-resources", "kubelet.sock")
}

// Start writes the node under root (which must not exist or be empty) and serves its kubelet.
// The GPUs' /dev/nvidia minors are their indices, as on most machines.
func Start(root string, pods *Pods, gpus map[int]GPU) (*Node, error) {
	host := hostfixture.Host{CgroupVersion: 2, CDISpecs: map[string]string{}}
	for i := range len(gpus) {
		if gpus[i].PCIAddress != "" {
			continue // AMD: the amdgpu driver's files are the caller's (amdgpufixture)
		}
		busID := gpus[i].NvidiaBusID
		if busID == "" {
			busID = fmt.Sprintf("0000:%02x:00.0", i+1)
		}
		host.NvidiaGPUs = append(host.NvidiaGPUs, hostfixture.NvidiaGPU{BusID: busID, Minor: i, UUID: gpus[i].UUID})
	}
	for _, p := range pods.HostProcesses {
		host.Processes = append(host.Processes, hostfixture.Process{PID: p.PID, Comm: p.Comm, Cmdline: []string{p.Comm}, State: "S", RSSPages: 1000})
	}
	var listed []*v1.PodResources
	netns := uint32(4026540000) // each pod its own network namespace
	sandboxPID := pods.maxPID()
	for _, pod := range pods.Pods {
		uid := podUID(pod)
		entry := &v1.PodResources{Namespace: pod.Namespace, Name: pod.Name}
		netns++
		sandboxPID++
		// containerd starts every pod's sandbox, whose random id sorts before or after the app
		// containers' as it happens: sandboxID is a hash as well.
		hp := hostfixture.Pod{Sandbox: &hostfixture.Sandbox{ID: sandboxID(pod), PID: sandboxPID}}
		for _, c := range pod.Containers {
			hc := hostfixture.Container{
				CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + containerID(pod, c) + ".scope",
				CPUUsec:    3_600_000_000, MemUsage: 8 << 30, MemLimit: 32 << 30, InactiveFile: 1 << 30,
			}
			if pod.State != StateGone {
				hc.Pod = &hostfixture.PodLogs{Namespace: pod.Namespace, Name: pod.Name, Container: c.Name}
			}
			env := environ(c.Env)
			for _, pid := range c.PIDs {
				hc.Processes = append(hc.Processes, hostfixture.Process{
					PID: pid, Comm: "python3", Cmdline: []string{"python3", "train.py"}, Env: env, State: "S", RSSPages: 250_000,
					NetNS: netns, RxBytes: 40 << 30, TxBytes: 12 << 30,
				})
			}
			hp.Containers = append(hp.Containers, hc)
			ctr := &v1.ContainerResources{Name: c.Name}
			for _, d := range c.Devices {
				ids := make([]string, 0, len(d.IDs))
				for _, id := range d.IDs {
					resolved, err := deviceID(id, gpus)
					if err != nil {
						return nil, fmt.Errorf("pod %s/%s container %s: %w", pod.Namespace, pod.Name, c.Name, err)
					}
					ids = append(ids, resolved)
				}
				ctr.Devices = append(ctr.Devices, &v1.ContainerDevices{ResourceName: d.Resource, DeviceIds: ids})
			}
			for _, cl := range c.Claims {
				claim, err := nvidiaClaim(pod, cl, gpus)
				if err != nil {
					return nil, fmt.Errorf("pod %s/%s container %s: claim %s: %w", pod.Namespace, pod.Name, c.Name, cl.Name, err)
				}
				file, spec := claim.CDISpec()
				host.CDISpecs[file] = spec
				ctr.DynamicResources = append(ctr.DynamicResources, claim.Resource())
			}
			entry.Containers = append(entry.Containers, ctr)
		}
		host.Pods = append(host.Pods, hp)
		if pod.State == StateRunning {
			listed = append(listed, entry)
		}
	}
	if err := hostfixture.Write(root, host); err != nil {
		return nil, err
	}
	srv, err := podresourcestest.NewServer(Socket(root))
	if err != nil {
		return nil, err
	}
	srv.SetPods(listed...)
	srv.SetAllocatable(allocatable(gpus)...)
	return &Node{Root: root, kubelet: srv}, nil
}

// Close stops the node's kubelet.
func (n *Node) Close() { n.kubelet.Close() }

func allocatable(gpus map[int]GPU) []*v1.ContainerDevices {
	whole := &v1.ContainerDevices{ResourceName: "nvidia.com/gpu"}
	mig := &v1.ContainerDevices{ResourceName: "nvidia.com/mig-1g.10gb"}
	amd := &v1.ContainerDevices{ResourceName: "amd.com/gpu"}
	for i := 0; i < len(gpus); i++ {
		if gpus[i].PCIAddress != "" {
			amd.DeviceIds = append(amd.DeviceIds, gpus[i].PCIAddress)
			continue
		}
		if len(gpus[i].MIG) > 0 {
			mig.DeviceIds = append(mig.DeviceIds, gpus[i].MIG...)
		} else {
			whole.DeviceIds = append(whole.DeviceIds, gpus[i].UUID)
		}
	}
	if len(amd.DeviceIds) > 0 {
		return []*v1.ContainerDevices{amd}
	}
	return []*v1.ContainerDevices{whole, mig}
}

// deviceID turns "gpu:N", "gpu:N::R" or "mig:N:I" into the id a device plugin would report.
func deviceID(id string, gpus map[int]GPU) (string, error) {
	kind, rest, _ := strings.Cut(id, ":")
	switch kind {
	case "gpu":
		index, replica, isReplica := strings.Cut(rest, "::")
		g, ok := gpus[atoi(index)]
		if !ok {
			return "", fmt.Errorf("device %q: no GPU %s in the scenario", id, index)
		}
		switch {
		case g.PCIAddress != "" && isReplica:
			return "", fmt.Errorf("device %q: ROCm's device plugin has no time-slicing replicas", id)
		case g.PCIAddress != "":
			return g.PCIAddress, nil
		case isReplica:
			return g.UUID + "::" + replica, nil
		}
		return g.UUID, nil
	case "mig":
		index, slice, _ := strings.Cut(rest, ":")
		g := gpus[atoi(index)]
		if s := atoi(slice); s >= 0 && s < len(g.MIG) {
			return g.MIG[s], nil
		}
		return "", fmt.Errorf("device %q: GPU %s has no MIG slice %s in the scenario", id, index, slice)
	}
	return "", fmt.Errorf("device %q: want gpu:N, gpu:N::R or mig:N:I", id)
}

// nvidiaClaim is the claim as NVIDIA's DRA driver prepared it, in the demo node's pool.
func nvidiaClaim(pod Pod, cl Claim, gpus map[int]GPU) (podresourcestest.NvidiaClaim, error) {
	claim := podresourcestest.NvidiaClaim{
		UID:       uid("resourceclaim/" + pod.Namespace + "/" + cl.Name),
		Namespace: pod.Namespace, Name: cl.Name, Pool: "dgx-a100-demo",
	}
	for _, id := range cl.Devices {
		index, ok := strings.CutPrefix(id, "gpu:")
		if _, known := gpus[atoi(index)]; !ok || !known {
			return claim, fmt.Errorf("device %q: want gpu:N, a GPU of the scenario", id)
		}
		claim.Devices = append(claim.Devices, podresourcestest.NvidiaDevice{Minor: atoi(index)})
	}
	return claim, nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func environ(env map[string]string) []string {
	out := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// podUID and containerID are derived from the names, so a demo node is the same every run.
func podUID(p Pod) string { return uid(p.Namespace + "/" + p.Name) }

// uid is a UID derived from what it names.
func uid(name string) string {
	h := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func containerID(p Pod, c Container) string {
	h := sha256.Sum256([]byte(p.Namespace + "/" + p.Name + "/" + c.Name))
	return fmt.Sprintf("%x", h)
}

// sandboxID hashes a name no container can have: Kubernetes names cannot hold "_".
func sandboxID(p Pod) string {
	return containerID(p, Container{Name: "_sandbox"})
}

// maxPID is the largest pid of the pods file: the sandboxes' pause processes come after it.
func (p *Pods) maxPID() int {
	highest := 1
	for _, pod := range p.Pods {
		for _, c := range pod.Containers {
			highest = max(highest, slices.Max(append([]int{0}, c.PIDs...)))
		}
	}
	for _, h := range p.HostProcesses {
		highest = max(highest, h.PID)
	}
	return highest
}

// decodeStrict decodes the YAML file at path into v, refusing keys v does not have; errors name
// the file.
func decodeStrict(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
