// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// The kubelet as it really behaves (issue 31): a holder in crash back-off, a one-shot pod that
// ends, a kubelet restarted while the API server is stopped, a kubelet stopped longer than
// zombie_after. In each window the agent's page is scraped every 2 s, and no scrape may show a
// GPU held by a pod the kubelet did not give it, or a live container as a zombie.

const scrapeEvery = 2 * time.Second

// snoop holds GPU 3's second MIG slice through the kubelet and names GPU 4 in its environment.
const snoopManifest = `apiVersion: v1
kind: Pod
metadata: {name: snoop, namespace: research}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/realnode/busybox:1.35
      imagePullPolicy: Never
      command: [/bin/busybox, sleep, "86400"]
      env:
        - {name: PAI_USER_NAME, value: mallory}
        - {name: NVIDIA_VISIBLE_DEVICES, value: "%s"}
      resources: {limits: {nvidia.com/mig-3g.20gb: 1}}
`

// gpuPod holds one GPU: running for 12 s (more than the agent's refresh) then failing
// (restartPolicy Always: crash back-off), or running for 40 s and ending (Never: a one-shot job).
const gpuPodManifest = `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: research}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: %s
  containers:
    - name: main
      image: localhost/realnode/busybox:1.35
      imagePullPolicy: Never
      command: [/bin/busybox, sh, -c, "sleep %d; exit %d"]
      resources: {limits: {nvidia.com/gpu: 1}}
`

// window is what the scrapes of one window saw.
type window struct {
	scrapes              int
	wrong                []string // series of a holder the kubelet did not give the GPU
	zombies              []string
	notReady             int // scrapes with gpu_attribution_kubelet_ready 0
	errorsFirst, errLast float64
	held                 map[string]int // scrapes showing "pod on uuid", by that key
}

// watch scrapes the agent's page every 2 s while act runs and for at least d, checking each
// scrape against the kubelet's allocation given by allowed ("namespace/pod" -> GPU UUIDs).
func watch(t *testing.T, d time.Duration, allowed map[string][]string, act func()) *window {
	t.Helper()
	w := &window{held: map[string]int{}, errorsFirst: -1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if act != nil {
			act()
		}
	}()
	deadline := time.Now().Add(d)
	for {
		p, err := scrape(agentMetrics)
		if err == nil {
			w.check(p, allowed)
		}
		select {
		case <-done:
			if time.Now().After(deadline) {
				return w
			}
		default:
		}
		time.Sleep(scrapeEvery)
	}
}

func (w *window) check(p page, allowed map[string][]string) {
	w.scrapes++
	for _, family := range []string{"task_gpu_percent", "task_gpu_mem_percent"} {
		for _, s := range p.find(family, nil) {
			if s.labels["dra_claim_name"] != "" {
				continue // DRA holders: testDRA's
			}
			pod := s.labels["namespace"] + "/" + s.labels["pod_name"]
			w.held[s.labels["pod_name"]+" on "+s.labels["uuid"]]++
			ok := false
			for _, uuid := range allowed[pod] {
				ok = ok || uuid == s.labels["uuid"]
			}
			if !ok {
				w.wrong = append(w.wrong, fmt.Sprintf("scrape %d at %s: %s", w.scrapes, time.Now().Format(time.TimeOnly), s))
			}
		}
	}
	for _, s := range p.find("zombie_container_count", nil) {
		if s.value > 0 {
			w.zombies = append(w.zombies, s.String())
		}
	}
	for _, s := range p.find("gpu_attribution_kubelet_ready", nil) {
		if s.value == 0 {
			w.notReady++
		}
	}
	for _, s := range p.find("gpu_attribution_source_errors_total", labels("source", "pod_resources")) {
		if w.errorsFirst < 0 {
			w.errorsFirst = s.value
		}
		w.errLast = s.value
	}
}

// assertRight: no scrape of the window showed a wrong holder or a zombie.
func (w *window) assertRight(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d scrapes, %d not ready, pod_resources errors %g -> %g", what, w.scrapes, w.notReady, w.errorsFirst, w.errLast)
	assert.Empty(t, w.wrong, "%s: series of a GPU the kubelet did not give their pod", what)
	assert.Empty(t, w.zombies, "%s: no live container is a zombie", what)
}

// kubeletGPUs is the kubelet's allocation as GPU UUIDs by "namespace/pod" (a replica or a MIG
// slice as its GPU's; a DRA claim's device gpu-<minor> as that GPU).
func kubeletGPUs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for pod, devices := range draClaimants(t) {
		for _, device := range devices {
			minor, err := strconv.Atoi(strings.TrimPrefix(device, "gpu-"))
			require.NoError(t, err, "the DRA driver's device %q of %s", device, pod)
			out[pod] = append(out[pod], gpus[minor].UUID)
		}
	}
	for key, ids := range allocations(t) {
		parts := strings.Split(key, "/")
		pod := parts[0] + "/" + parts[1]
		for _, id := range ids {
			id, _, _ = strings.Cut(id, "::")
			for i := range len(gpus) {
				g := gpus[i]
				if g.UUID == id || slices.Contains(g.MIG, id) {
					out[pod] = append(out[pod], g.UUID)
				}
			}
		}
	}
	return out
}

func apply(t *testing.T, manifest string) {
	t.Helper()
	out, err := node.Kubectl([]byte(manifest), "apply", "-f", "-")
	require.NoError(t, err, out)
}

// deletePod deletes a pod of research, the namespace of the workload's jobs, and waits until it is gone.
func deletePod(t *testing.T, name string) {
	t.Helper()
	const namespace = "research"
	// Not t.Context(): it is canceled before the cleanups that call this run.
	ctx := context.WithoutCancel(t.Context())
	err := node.Admin.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	poll.Until(t, time.Minute, fmt.Sprintf("%s/%s to be deleted", namespace, name), func() bool {
		_, getErr := node.Admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(getErr)
	})
}

// testKubeletAsItBehaves runs the four windows; erin's job is off GPU 4 during the first two
// (their pods take it) and back on it after.
func testKubeletAsItBehaves(t *testing.T, w *workload) {
	t.Run("environment names a GPU its holder lost", func(t *testing.T) { testEnvironmentNamesGPU(t, w) })
	t.Run("kubelet restarted while the API server is stopped", testKubeletRestartStalledAPIServer)
	t.Run("kubelet stopped longer than zombie_after", testKubeletStopped)
}

// testEnvironmentNamesGPU: snoop (a MIG slice from the kubelet) names GPU 4 in its
// NVIDIA_VISIBLE_DEVICES while GPU 4's kubelet holder is in crash back-off, then while a
// one-shot pod that held it ends: snoop never shows on GPU 4.
func testEnvironmentNamesGPU(t *testing.T, w *workload) {
	erin, err := node.Admin.CoreV1().Pods("research").Get(t.Context(), "sweep-3", metav1.GetOptions{})
	require.NoError(t, err)
	erin.ObjectMeta = metav1.ObjectMeta{Name: erin.Name, Namespace: erin.Namespace, Labels: erin.Labels}
	erin.Spec.NodeName, erin.Status = "", corev1.PodStatus{}
	restored := false
	restore := func() {
		restored = true
		deletePod(t, "snoop")
		deletePod(t, "crasher")
		deletePod(t, "one-shot")
		// Not t.Context(): a cleanup runs after it is canceled.
		_, createErr := node.Admin.CoreV1().Pods("research").Create(context.WithoutCancel(t.Context()), erin, metav1.CreateOptions{})
		require.NoError(t, createErr)
	}
	t.Cleanup(func() {
		if !restored {
			restore()
		}
	})
	// erin's series of GPU 4 end at the agent's next collection after her pod is gone: the
	// allocation before the window counts as the kubelet's too.
	before := kubeletGPUs(t)
	deletePod(t, "sweep-3") // GPU 4 free
	apply(t, fmt.Sprintf(snoopManifest, gpus[4].UUID))
	waitRunning(t, "research", "snoop")

	apply(t, fmt.Sprintf(gpuPodManifest, "crasher", "Always", 12, 1))
	waitRunning(t, "research", "crasher")
	allowed := kubeletGPUs(t)
	require.Equal(t, []string{gpus[4].UUID}, allowed["research/crasher"], "the crashing pod holds GPU 4")
	allowed["research/sweep-3"] = before["research/sweep-3"]
	// Two crashes and their back-off (10 s, then 20 s).
	win := watch(t, 50*time.Second, allowed, nil)
	win.assertRight(t, "a holder in crash back-off")
	crasher, err := node.Admin.CoreV1().Pods("research").Get(t.Context(), "crasher", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, crasher.Status.ContainerStatuses)
	assert.Positive(t, crasher.Status.ContainerStatuses[0].RestartCount, "the holder crashed and backed off in the window")
	assert.Positive(t, win.held["crasher on "+gpus[4].UUID], "the holder on its GPU while it ran")
	assert.Zero(t, win.held["snoop on "+gpus[4].UUID])
	deletePod(t, "crasher")

	apply(t, fmt.Sprintf(gpuPodManifest, "one-shot", "Never", 40, 0))
	waitRunning(t, "research", "one-shot")
	crasherGPUs := allowed["research/crasher"] // its series end at the agent's next collection
	allowed = kubeletGPUs(t)
	require.Equal(t, []string{gpus[4].UUID}, allowed["research/one-shot"], "the one-shot pod holds GPU 4")
	allowed["research/crasher"] = crasherGPUs
	// It runs 40 s (its container is named once the kubelet's log layout is read again), then
	// has ended for 30 s (three refreshes of the agent).
	win = watch(t, 70*time.Second, allowed, nil)
	win.assertRight(t, "a one-shot pod that ended")
	oneShot, err := node.Admin.CoreV1().Pods("research").Get(t.Context(), "one-shot", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Succeeded", string(oneShot.Status.Phase), "the one-shot pod ended in the window")
	assert.Positive(t, win.held["one-shot on "+gpus[4].UUID], "the one-shot pod on its GPU while it ran")
	assert.Zero(t, win.held["snoop on "+gpus[4].UUID])

	restore()
	waitRunning(t, "research", "sweep-3")
	delete(w.pids, "research/sweep-3/trainer")
	erinOnGPU4(t, "after the pods that took GPU 4")
}

// testKubeletRestartStalledAPIServer: the API server stopped (SIGSTOP, 35 s: more than three
// refreshes of the agent, less than the node controller's grace) while the kubelet restarts,
// which then lists no pods of its own. Attribution keeps the last complete answer, the gauge
// and the counter say the kubelet was not ready, and it resumes once the API server continues.
func testKubeletRestartStalledAPIServer(t *testing.T) {
	erinOnGPU4(t, "before")
	allowed := kubeletGPUs(t)
	registrations := node.Plugin.Registrations()
	apiserver := node.APIServerPID()
	continued := false
	cont := func() {
		if !continued {
			continued = true
			require.NoError(t, syscall.Kill(apiserver, syscall.SIGCONT))
		}
	}
	t.Cleanup(cont)
	win := watch(t, 35*time.Second, allowed, func() {
		if err := syscall.Kill(apiserver, syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		if err := node.RestartKubelet(); err != nil {
			t.Error(err)
		}
	})
	cont()
	win.assertRight(t, "the kubelet restarted while the API server was stopped")
	assert.Positive(t, win.notReady, "gpu_attribution_kubelet_ready was 0 while the kubelet listed none of its pods")
	assert.Greater(t, win.errLast, win.errorsFirst, "its incomplete answers were counted")
	assert.Positive(t, win.held["resnet-worker-0 on "+gpus[0].UUID]+win.held["sweep-3 on "+gpus[4].UUID], "the last complete answer stood")
	kubeletBack(t, registrations)
}

// testKubeletStopped: with zombie_after at 15 s, the kubelet stopped for 40 s: no container
// becomes a zombie, nobody's environment decides a GPU (erin's names GPU 0), and attribution
// resumes when it starts again.
func testKubeletStopped(t *testing.T) {
	out, err := node.Kubectl(nil, "patch", "-n", namespace, "daemonset/otelcol-gpu-agent", "--type=json",
		`-p=[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--set=processors::gpu_attribution::zombie_after=15s"}]`)
	require.NoError(t, err, out)
	t.Cleanup(func() {
		out, err := node.Kubectl(nil, "rollout", "undo", "-n", namespace, "daemonset/otelcol-gpu-agent")
		require.NoError(t, err, out)
		rolledOut(t, "daemonset/otelcol-gpu-agent")
	})
	rolledOut(t, "daemonset/otelcol-gpu-agent")
	erinOnGPU4(t, "with zombie_after 15s")
	allowed := kubeletGPUs(t)
	registrations := node.Plugin.Registrations()
	started := false
	t.Cleanup(func() {
		if !started {
			_ = node.StartKubelet()
		}
	})
	win := watch(t, 40*time.Second, allowed, node.StopKubelet)
	started = true
	require.NoError(t, node.StartKubelet())
	win.assertRight(t, "the kubelet stopped for longer than zombie_after")
	assert.Positive(t, win.notReady, "gpu_attribution_kubelet_ready was 0 while the kubelet did not answer")
	assert.Greater(t, win.errLast, win.errorsFirst, "its failed refreshes were counted")
	kubeletBack(t, registrations)
}

// kubeletBack waits for the device plugin's registration with the kubelet, the gauge at 1 and
// erin's job on GPU 4 again (known from the kubelet only).
func kubeletBack(t *testing.T, registrations int) {
	t.Helper()
	const within = 2 * time.Minute
	err := poll.For(within, func() error {
		if node.Plugin.Registrations() == registrations {
			return errors.Join(errors.New("no registration since the restart"), node.Plugin.Err())
		}
		if !node.Allocatable(t.Context(), deviceResources(gpus)) {
			return errors.New("the node does not offer every device yet")
		}
		p, err := scrape(agentMetrics)
		if err != nil {
			return err
		}
		if r := p.find("gpu_attribution_kubelet_ready", nil); len(r) != 1 || r[0].value != 1 {
			return fmt.Errorf("gpu_attribution_kubelet_ready %v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waited %s for the kubelet to be back: %v; its log:\n%s", within, err, node.Log("kubelet", 30))
	}
	erinOnGPU4(t, "after the kubelet is back")
}

// draClaimants are the devices of the pods ("namespace/pod") with a DRA claim in the kubelet's
// List.
func draClaimants(t *testing.T) map[string][]string {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+node.HostPath("/var/lib/kubelet/pod-resources/kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err, "the kubelet's pod-resources List")
	out := map[string][]string{}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDynamicResources() {
				for _, r := range d.GetClaimResources() {
					pod := p.GetNamespace() + "/" + p.GetName()
					out[pod] = append(out[pod], r.GetDeviceName())
				}
			}
		}
	}
	return out
}
