// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build realnode

package realnode_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
)

// workload is the node's pods (testdata/pods.yaml), running, and the GPU process outside them.
type workload struct {
	// scenario is testdata/scenario.yaml with the real PIDs.
	scenario []byte
	// pids are the first processes of the pods' containers ("namespace/pod/container") and
	// "outside", the process outside any pod.
	pids map[string]int
}

// startWorkload runs the pods one by one, in the file's order, each running before the next,
// and the process outside any pod.
func startWorkload(t *testing.T) *workload {
	t.Helper()
	manifests, err := renderPods()
	require.NoError(t, err)
	for doc := range bytes.SplitSeq(manifests, []byte("\n---\n")) {
		var obj unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal(doc, &obj.Object))
		out, applyErr := node.Kubectl(doc, "apply", "-f", "-")
		require.NoError(t, applyErr, out)
		if obj.GetKind() == "Pod" {
			waitRunning(t, obj.GetNamespace(), obj.GetName())
		}
	}
	w := &workload{pids: map[string]int{}}
	// In the node's namespaces, so that a teardown after a crash finds it too.
	outside := node.Command("/bin/busybox", "sleep", "86400")
	require.NoError(t, outside.Start())
	t.Cleanup(func() {
		_ = outside.Process.Signal(syscall.SIGKILL)
		_ = outside.Wait()
	})
	w.pids["outside"] = outside.Process.Pid
	w.scenario, err = renderScenario(w.pid)
	require.NoError(t, err)
	return w
}

// pid is the PID of one of the scenario's processes: "outside", or a container's first process
// ("namespace/pod/container").
func (w *workload) pid(name string) (int, error) {
	if pid, ok := w.pids[name]; ok {
		return pid, nil
	}
	pid, err := containerPID(name)
	if err == nil {
		w.pids[name] = pid
	}
	return pid, err
}

func waitRunning(t *testing.T, namespace, name string) {
	t.Helper()
	const within = 2 * time.Minute
	if err := poll.For(within, func() error {
		p, err := node.Admin.CoreV1().Pods(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	}); err != nil {
		t.Fatalf("waited %s for pod %s/%s to run: %v; its events:\n%s", within, namespace, name, err, describe(namespace, name))
	}
}

// describe is kubectl describe pod, for a failure's message.
func describe(namespace, name string) string {
	out, _ := node.Kubectl(nil, "describe", "pod", "-n", namespace, name)
	return out
}

// containerPID is the PID on the node of a container's first process ("namespace/pod/container").
func containerPID(name string) (int, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 {
		return 0, fmt.Errorf("%q: want namespace/pod/container", name)
	}
	id, err := runningContainer(parts[0], parts[1], parts[2])
	if err != nil {
		return 0, err
	}
	return node.ContainerPID(id)
}

// runningContainer is the runtime's id of a pod's running container.
func runningContainer(namespace, pod, container string) (string, error) {
	p, err := node.Admin.CoreV1().Pods(namespace).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.Name == container && cs.ContainerID != "" {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id, nil
		}
	}
	return "", fmt.Errorf("%s/%s has no running container %s", namespace, pod, container)
}

// containerID is runningContainer, failing the test without one.
func containerID(t *testing.T, namespace, pod, container string) string {
	t.Helper()
	id, err := runningContainer(namespace, pod, container)
	require.NoError(t, err)
	return id
}

// allocations asks the kubelet's pod-resources API, as the agent does, which device ids each
// container ("namespace/pod/container") holds.
func allocations(t *testing.T) map[string][]string {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+node.HostPath("/var/lib/kubelet/pod-resources/kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err, "the kubelet's pod-resources List")
	out := map[string][]string{}
	for _, p := range resp.PodResources {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				key := p.Namespace + "/" + p.Name + "/" + c.Name
				out[key] = append(out[key], d.DeviceIds...)
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}
