// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/poll"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

// gpuBatch is one collection of the real gpu receiver on its simulated backend.
func gpuBatch(tb testing.TB, scenario string) pmetric.Metrics {
	tb.Helper()
	md, err := gpureceivertest.SimulatedBatch(scenario)
	require.NoError(tb, err)
	return md
}

// gpuIDs are the batch's GPU identities by index.
type gpuIDs map[int]demonode.GPU

func idsOf(md pmetric.Metrics) gpuIDs { return gpureceivertest.GPUs(md) }

// The test node: which container holds which GPU is in testdata/scenarios/node.yaml.
const (
	gpuResource = "nvidia.com/gpu"
	migResource = "nvidia.com/mig-1g.10gb"
)

func podUID(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n) }
func ctrID(n int) string  { return strings.Repeat(fmt.Sprintf("%02x", n), 32) }

// sandboxID is pod n's sandbox: before its app container in the cgroup walk's order for even n,
// after it for odd n, so that a sandbox taken for its app container shows either way.
func sandboxID(n int) string {
	if n%2 == 0 {
		return "00" + ctrID(n)[2:]
	}
	return "ff" + ctrID(n)[2:]
}

// pod n is a containerd pod (burstable, systemd driver) with its sandbox and one app container
// of pids.
func pod(n int, logs *hostfixture.PodLogs, pids []int, env ...string) hostfixture.Pod {
	c := hostfixture.Container{
		CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(podUID(n), "-", "_") + ".slice/cri-containerd-" + ctrID(n) + ".scope",
		Pod:        logs,
		MemUsage:   1 << 30,
	}
	for _, pid := range pids {
		c.Processes = append(c.Processes, hostfixture.Process{PID: pid, Comm: "python3", Cmdline: []string{"python3"}, Env: env, State: "S", RSSPages: 100})
	}
	return hostfixture.Pod{Sandbox: &hostfixture.Sandbox{ID: sandboxID(n), PID: 900 + n}, Containers: []hostfixture.Container{c}}
}

func paiEnv(user, job string) []string {
	return []string{"PAI_USER_NAME=" + user, "PAI_JOB_NAME=" + user + "~" + job, "PAI_CURRENT_TASK_ROLE_NAME=worker", "PAI_TASK_INDEX=0", "PAI_VIRTUAL_CLUSTER=default"}
}

// Container numbers of the test node.
const (
	trainer  = 1
	shareA   = 2
	shareB   = 3
	migInfer = 4
	zombie   = 5 // its pod is gone: no logs, not listed
	envJob   = 6
	idle     = 7
	badEnv   = 8
	finished = 9 // its pod finished: logs kept, not listed
)

func testHost() hostfixture.Host {
	return hostfixture.Host{
		CgroupVersion: 2,
		Processes:     []hostfixture.Process{{PID: 4001, Comm: "burn", Cmdline: []string{"/opt/burn"}, State: "S", RSSPages: 100}},
		Pods: []hostfixture.Pod{
			pod(trainer, &hostfixture.PodLogs{Namespace: "team-a", Name: "resnet-0", Container: "trainer"}, []int{1001, 1002}, paiEnv("alice", "resnet")...),
			pod(shareA, &hostfixture.PodLogs{Namespace: "team-b", Name: "notebook-bob", Container: "notebook"}, []int{2001}, paiEnv("bob", "explore")...),
			// No job variables: named after its pod.
			pod(shareB, &hostfixture.PodLogs{Namespace: "team-c", Name: "notebook-carol", Container: "notebook"}, []int{2002}, "HOME=/root"),
			pod(migInfer, &hostfixture.PodLogs{Namespace: "serving", Name: "bert-0", Container: "server"}, []int{3001}, paiEnv("dave", "bert")...),
			pod(zombie, nil, []int{4002}, paiEnv("erin", "old")...),
			pod(envJob, &hostfixture.PodLogs{Namespace: "team-d", Name: "sweep-3", Container: "worker"}, []int{5001}, append(paiEnv("frank", "sweep"), "NVIDIA_VISIBLE_DEVICES=5")...),
			pod(idle, &hostfixture.PodLogs{Namespace: "team-e", Name: "waiting-0", Container: "waiting"}, []int{6001}, paiEnv("grace", "queued")...),
			pod(badEnv, &hostfixture.PodLogs{Namespace: "team-f", Name: "odd-0", Container: "c"}, []int{8001}, append(paiEnv("heidi", "odd"), "NVIDIA_VISIBLE_DEVICES=7,bogus,,GPU-")...),
			pod(finished, &hostfixture.PodLogs{Namespace: "team-g", Name: "done-0", Container: "main"}, []int{9001}, paiEnv("ivan", "done")...),
		},
	}
}

// kubeletPods is what the kubelet lists on the test node.
func kubeletPods(ids gpuIDs) []*v1.PodResources {
	c, pod := podresourcestest.Container, podresourcestest.Pod
	return []*v1.PodResources{
		pod("team-a", "resnet-0", c("trainer", gpuResource, ids[0].UUID, ids[1].UUID)),
		pod("team-b", "notebook-bob", c("notebook", gpuResource, ids[2].UUID+"::0")),
		pod("team-c", "notebook-carol", c("notebook", gpuResource, ids[2].UUID+"::1")),
		pod("serving", "bert-0", c("server", migResource, ids[3].MIG[0])),
		pod("team-d", "sweep-3", c("worker", "")),
		pod("team-e", "waiting-0", c("waiting", gpuResource, ids[6].UUID)),
		pod("team-f", "odd-0", c("c", "")),
		pod("kube-system", "coredns-0", c("coredns", "")),
	}
}

// testEnv is a node (fixture tree, kubelet socket) and a started processor on it, with the
// node's clock and refreshes in the test's hands: its refresh loop runs once at start and never
// ticks (an hour's interval on a clock moved by minutes); the test refreshes by hand.
type testEnv struct {
	t         testing.TB
	root      string
	kubelet   *podresourcestest.Server
	attr      *gpuAttribution
	logs      *observer.ObservedLogs
	clock     *clock.Fake
	refreshed chan struct{}
}

type envOption func(*Config)

// socketDir is short: unix socket paths are limited to 108 bytes.
func socketDir(tb testing.TB) string {
	dir, err := os.MkdirTemp("", "gpuattr") //nolint:usetesting // short, as said above
	require.NoError(tb, err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newTestEnv(tb testing.TB, host hostfixture.Host, kubelet *podresourcestest.Server, opts ...envOption) *testEnv {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "host")
	require.NoError(tb, hostfixture.Write(root, host))
	e := &testEnv{
		t: tb, root: root, kubelet: kubelet, clock: clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		refreshed: make(chan struct{}, 1),
	}
	cfg := createDefaultConfig().(*Config)
	cfg.RootPath = root
	cfg.RefreshInterval = time.Hour // refreshes come from e.refresh
	cfg.PodResources.Socket = filepath.Join(socketDir(tb), "absent.sock")
	if kubelet != nil {
		cfg.PodResources.Socket = kubelet.Socket
	}
	for _, o := range opts {
		o(cfg)
	}
	require.NoError(tb, confmap.Validate(cfg))
	core, logs := observer.New(zapcore.InfoLevel)
	e.logs = logs
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	e.attr = newGPUAttribution(cfg, set)
	e.attr.adjustNode = func(s *nodeSettings) {
		s.clock = e.clock
		s.refreshed = e.refreshed
	}
	require.NoError(tb, e.attr.start(tb.Context(), nil))
	tb.Cleanup(func() { require.NoError(tb, e.attr.shutdown(context.WithoutCancel(tb.Context()))) })
	// The loop's refresh at start; the test's own come after it, on the test's goroutine.
	select {
	case <-e.refreshed:
	case <-time.After(10 * time.Second):
		tb.Fatal("no refresh of the node within 10s of its start")
	}
	if cfg.usesPodResources() {
		// The kubelet client's first refresh runs at start, beside the node's.
		poll.Until(tb, 10*time.Second, "the first pod-resources refresh", func() bool {
			k := e.attr.node.kubelet
			return k.Snapshot() != nil || k.Failures() > 0
		})
		e.refresh() // the node's inventory now sees the kubelet's answer
	}
	return e
}

func (e *testEnv) advance(d time.Duration) { e.clock.Advance(d) }

// advanceThroughLoop moves the clock by the node's refresh interval (an hour here) and waits for
// the refresh that tick runs on the loop's goroutine, so that the test's own refreshes never run
// beside it (the node's state is the loop's alone).
func (e *testEnv) advanceThroughLoop() {
	e.t.Helper()
	e.clock.Advance(time.Hour)
	select {
	case <-e.refreshed:
	case <-time.After(10 * time.Second):
		e.t.Fatal("no refresh of the node within 10s of its loop's tick")
	}
}

// refresh runs one refresh of the node's inventory, as a tick of its loop would.
func (e *testEnv) refresh() { e.attr.node.refresh() }

// process runs a batch through the processor and returns what it added.
func (e *testEnv) process(batch pmetric.Metrics) pmetric.Metrics {
	e.t.Helper()
	in := pmetric.NewMetrics()
	batch.CopyTo(in)
	out, err := e.attr.processMetrics(context.Background(), in)
	require.NoError(e.t, err)
	return added(out)
}

// added keeps the processor's resources of a batch.
func added(md pmetric.Metrics) pmetric.Metrics {
	out := pmetric.NewMetrics()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if rm.ScopeMetrics().Len() > 0 && rm.ScopeMetrics().At(0).Scope().Name() == metadata.ScopeName {
			rm.CopyTo(out.ResourceMetrics().AppendEmpty())
		}
	}
	return out
}

// point is one data point of the output, by metric and labels.
type point struct {
	value  float64
	absent bool // NoRecordedValue: the series ended
}

// points indexes the output: metric name -> "job_name|minor_number|…" -> value.
func points(md pmetric.Metrics, resourceKey string, attrKeys ...string) map[string]map[string]point {
	out := map[string]map[string]point{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := ""
		if v, ok := rm.Resource().Attributes().Get(resourceKey); ok {
			res = v.AsString()
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				if m.Type() == pmetric.MetricTypeGauge {
					dps = m.Gauge().DataPoints()
				} else {
					dps = m.Sum().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					key := []string{res}
					for _, a := range attrKeys {
						v := ""
						if av, ok := dp.Attributes().Get(a); ok {
							v = av.AsString()
						}
						key = append(key, v)
					}
					if out[m.Name()] == nil {
						out[m.Name()] = map[string]point{}
					}
					out[m.Name()][strings.Join(key, "|")] = point{value: number(dp), absent: dp.Flags().NoRecordedValue()}
				}
			}
		}
	}
	return out
}
