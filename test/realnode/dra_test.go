// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode"
	"github.com/otelcol-gpu/otelcol-gpu/test/realnode/draplugin"
)

// GPUs 5, 6 and 7 are not the device plugin's: the DRA driver publishes them, under the driver
// name the agent reads by default (gpu_attribution's pod_resources::drivers). testdata/dra.yaml's
// pod claims one, and is given GPU 5, the first; the device taint test claims another.
const (
	draGPU    = 5
	draDriver = "gpu.nvidia.com"
	// The claim and its pod (testdata/dra.yaml).
	draNamespace, draClaim, draPod = "llm", "llama-gpu", "llama-finetune-0"
)

// draGPUs are the GPUs the DRA driver publishes, in its ResourceSlice's order.
var draGPUs = []int{draGPU, 6, 7}

// startDRA lays out the NVIDIA driver's files for the simulated GPUs on the node, starts the DRA
// driver with draGPUs, and runs testdata/dra.yaml's pod with a ResourceClaim on it. The agent
// then joins the claim to the GPU as on a node with NVIDIA's DRA driver: the kubelet's
// pod-resources lists the claim's CDI device, the node's CDI spec its /dev/nvidia<minor>, and
// /proc/driver/nvidia that minor's UUID.
func startDRA(t *testing.T) *draplugin.Plugin {
	t.Helper()
	// /proc/driver/nvidia/gpus/<bus id>/information for each GPU, as the driver has it.
	driver := t.TempDir()
	for i := range len(gpus) {
		bus := fmt.Sprintf("0000:%02x:00.0", i+1)
		info := fmt.Sprintf("Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\n"+
			"DMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n", gpus[i].UUID, bus, i)
		dir := filepath.Join(driver, "nvidia", "gpus", bus)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		//nolint:gosec // G306: the driver's files are world-readable
		require.NoError(t, os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o644))
	}
	require.NoError(t, os.Chmod(driver, 0o755))
	bindOnNode(t, driver, "/proc/driver")
	// The node's /var/run/cdi (/run is the node's own), where the driver writes its CDI specs.
	cdi := t.TempDir()
	require.NoError(t, os.Chmod(cdi, 0o755))
	bindOnNode(t, cdi, "/run/cdi")

	plugin, err := draplugin.Start(draplugin.Config{
		Driver: draDriver, NodeName: realnode.NodeName, Client: node.Admin,
		GPUs:       draPluginGPUs(),
		KubeletDir: node.HostPath("/var/lib/kubelet"), CDIDir: cdi,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, plugin.Stop(), "stopping the DRA driver") })
	begin := time.Now()
	const within = time.Minute
	if err = poll.For(within, func() error {
		if plugin.Registrations() == 0 {
			return errors.Join(errors.New("not registered with the kubelet"), plugin.Err())
		}
		_, getErr := node.Admin.ResourceV1().ResourceSlices().Get(t.Context(), realnode.NodeName+"-"+draDriver, metav1.GetOptions{})
		return errors.Join(getErr, plugin.Err())
	}); err != nil {
		t.Fatalf("waited %s for the DRA driver to register and publish its ResourceSlice: %v; the kubelet's log:\n%s", within, err, node.Log("kubelet", 30))
	}
	t.Logf("DRA driver registered and published in %s", time.Since(begin).Round(100*time.Millisecond))

	manifests, err := os.ReadFile(filepath.Join(testdata(), "dra.yaml"))
	require.NoError(t, err)
	// Deleted before the driver stops, so that the kubelet unprepares the claim with it.
	t.Cleanup(func() {
		out, deleteErr := node.Kubectl(manifests, "delete", "--ignore-not-found", "--timeout=2m", "-f", "-")
		assert.NoError(t, deleteErr, out)
	})
	out, err := node.Kubectl(manifests, "apply", "-f", "-")
	require.NoError(t, err, out)
	waitRunning(t, draNamespace, draPod)
	t.Logf("DRA pod running in %s", time.Since(begin).Round(100*time.Millisecond))
	claim, err := node.Admin.ResourceV1().ResourceClaims(draNamespace).Get(t.Context(), draClaim, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation, "the scheduler allocated the claim")
	require.Len(t, claim.Status.Allocation.Devices.Results, 1)
	r := claim.Status.Allocation.Devices.Results[0]
	assert.Equal(t, draDriver, r.Driver)
	assert.Equal(t, fmt.Sprintf("gpu-%d", draGPU), r.Device, "the claim has GPU %d", draGPU)
	assert.Positive(t, plugin.Prepared(string(claim.UID)), "the kubelet had the driver prepare the claim")
	return plugin
}

// draPluginGPUs are draGPUs as the DRA driver publishes them.
func draPluginGPUs() []draplugin.GPU {
	out := make([]draplugin.GPU, 0, len(draGPUs))
	for _, i := range draGPUs {
		out = append(out, draplugin.GPU{UUID: gpus[i].UUID, Minor: i})
	}
	return out
}

// bindOnNode bind-mounts dir at path in the node's mount namespace (which alone sees it), until
// the test ends.
func bindOnNode(t *testing.T, dir, path string) {
	t.Helper()
	out, err := node.Command("mkdir", "-p", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = node.Command("mount", "--bind", dir, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		out, err := node.Command("umount", path).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
}

// testDRA: the DRA pod's task series on GPU draGPU, with its claim's name and namespace, and no
// unjoined DRA device counted. What the kubelet reports over pod-resources is checked first, so
// that a failure says which side failed.
func testDRA(t *testing.T, plugin *draplugin.Plugin) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	claims := draAllocations(ctx, t)
	// The claim, its device (driver, pool, device) and the CDI device the driver prepared.
	want := fmt.Sprintf("%s/%s: %s/%s/gpu-%d %s=", draNamespace, draClaim, draDriver, realnode.NodeName, draGPU, draplugin.CDIKind)
	if assert.Len(t, claims, 1, "the kubelet lists the DRA pod's claim in pod-resources' dynamic_resources") {
		assert.True(t, strings.HasPrefix(claims[0], want), "%q starts with %q", claims[0], want)
	}
	assert.NoError(t, plugin.Err())
	// The kubelet deletes its node's ResourceSlices when it starts (the restarts check restarts
	// it): the driver has published its slice again.
	_, err := node.Admin.ResourceV1().ResourceSlices().Get(ctx, realnode.NodeName+"-"+draDriver, metav1.GetOptions{})
	assert.NoError(t, err, "the DRA driver's ResourceSlice")

	uuid := gpus[draGPU].UUID
	match := labels("pod_name", draPod, "namespace", draNamespace, "uuid", uuid)
	var p page
	if err = poll.For(waitFor, func() error {
		var scrapeErr error
		if p, scrapeErr = scrape(agentMetrics); scrapeErr != nil {
			return scrapeErr
		}
		if got := p.find("task_gpu_percent", match); len(got) != 1 {
			return fmt.Errorf("task_gpu_percent of %s/%s on GPU %d: %v; of the pod: %v; external: %v", draNamespace, draPod, draGPU, got,
				p.find("task_gpu_percent", labels("pod_name", draPod)), p.find("gpu_used_by_external_process_count", labels("uuid", uuid)))
		}
		return nil
	}); err != nil {
		t.Fatalf("waited %s for the DRA pod's GPU series: %v; the agent's warnings and errors:\n%s", waitFor, err, agentLog())
	}
	for _, metric := range []string{"task_gpu_percent", "task_gpu_mem_percent"} {
		got := p.find(metric, match)
		if assert.Len(t, got, 1, metric) {
			assert.Equal(t, draClaim, got[0].labels["dra_claim_name"], "%s carries the claim", metric)
			assert.Equal(t, draNamespace, got[0].labels["dra_claim_namespace"], "%s carries the claim's namespace", metric)
		}
	}
	assert.Empty(t, p.find("gpu_used_by_external_process_count", labels("uuid", uuid)), "the DRA pod's process is the pod's, not external")
	if errs := p.find("gpu_attribution_source_errors_total", labels("source", "dra")); assert.Len(t, errs, 1) {
		assert.Zero(t, errs[0].value, "every claimed device joined to its GPU")
	}
	// The device plugin's pods carry no claim.
	for _, s := range p.find("task_gpu_percent", labels("pod_name", "resnet-worker-0")) {
		assert.Empty(t, s.labels["dra_claim_name"], "%v", s)
	}
}

// draAllocations are the CDI devices of the DRA pod's claims, as the kubelet's pod-resources
// List answers (one string per claim: its namespace/name and CDI devices).
func draAllocations(ctx context.Context, t *testing.T) []string {
	t.Helper()
	resp := podResourcesList(ctx, t)
	var out []string
	for _, p := range resp.PodResources {
		if p.Namespace != draNamespace || p.Name != draPod {
			continue
		}
		for _, c := range p.Containers {
			for _, d := range c.DynamicResources {
				var b bytes.Buffer
				fmt.Fprintf(&b, "%s/%s:", d.ClaimNamespace, d.ClaimName)
				for _, r := range d.ClaimResources {
					fmt.Fprintf(&b, " %s/%s/%s", r.DriverName, r.PoolName, r.DeviceName)
					for _, cdi := range r.CdiDevices {
						fmt.Fprintf(&b, " %s", cdi.Name)
					}
				}
				out = append(out, b.String())
			}
		}
	}
	return out
}

// podResourcesList is the kubelet's pod-resources List, as the agent asks it.
func podResourcesList(ctx context.Context, t *testing.T) *podresourcesv1.ListPodResourcesResponse {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+node.HostPath("/var/lib/kubelet/pod-resources/kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err, "the kubelet's pod-resources List")
	return resp
}
