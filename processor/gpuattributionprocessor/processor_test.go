// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/goldentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources/podresourcestest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

const scenario = "testdata/scenarios/node.yaml"

func startKubelet(t *testing.T, ids gpuIDs) *podresourcestest.Server {
	srv, err := podresourcestest.NewServer(filepath.Join(socketDir(t), "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetPods(kubeletPods(ids)...)
	return srv
}

func compareGolden(t *testing.T, name string, actual pmetric.Metrics) {
	t.Helper()
	goldentest.Metrics(t, filepath.Join("testdata", "expected", name+".yaml"), actual,
		pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp(),
		pmetrictest.IgnoreResourceMetricsOrder(), pmetrictest.IgnoreMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder())
}

// TestAttribution: the kubelet answers. Exclusive GPUs get the device's values, the two pods on
// the time-sliced GPU their own shares, the MIG pod its slice's memory, the idle holder its
// GPU's zeros; the environment fills in for a GPU the kubelet gives nobody; the host process is
// external and the container whose pod is gone a zombie (after zombie_after).
func TestAttribution(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), startKubelet(t, ids))
	e.advance(5 * time.Minute)
	e.refresh()
	out := e.process(batch)
	compareGolden(t, "kubelet", out)

	byJob := points(out, "job_name", "minor_number", "mig_uuid")
	util, mem := byJob["task_gpu_percent"], byJob["task_gpu_mem_percent"]
	device := deviceValues(batch)

	for _, gpu := range []string{"0", "1"} {
		assert.Equal(t, device[gpu].util, util["alice~resnet|"+gpu+"|"].value, "an exclusive GPU: the device's utilization")
		assert.Equal(t, device[gpu].mem, mem["alice~resnet|"+gpu+"|"].value)
	}
	bob, carol := util["bob~explore|2|"].value, util["team-c/notebook-carol|2|"].value
	assert.InDelta(t, device["2"].util, bob+carol, 1e-9, "shares of a time-sliced GPU add up to the device")
	assert.InDelta(t, device["2"].util*30/40, bob, 1e-9, "bob's processes ran 30 of the GPU's 40 SM percent")
	assert.Less(t, bob, device["2"].util)
	assert.Less(t, carol, device["2"].util, "neither gets the whole device")
	assert.InDelta(t, device["2"].mem, mem["bob~explore|2|"].value+mem["team-c/notebook-carol|2|"].value, 1e-9)
	assert.InDelta(t, device["2"].mem*4000/16000, mem["bob~explore|2|"].value, 1e-9)

	migKey := "dave~bert|3|" + ids[3].MIG[0]
	assert.InDelta(t, 3000.0/19968*100, mem[migKey].value, 1e-9, "a MIG slice: the slice's memory")
	assert.NotContains(t, util, migKey, "NVML has no utilization in MIG mode")
	assert.NotContains(t, mem, "dave~bert|3|", "the MIG pod holds its slice, not the GPU")

	assert.Equal(t, device["5"].util, util["frank~sweep|5|"].value, "NVIDIA_VISIBLE_DEVICES where the kubelet gives the GPU to nobody")
	assert.Equal(t, 0.0, util["grace~queued|6|"].value, "an idle holder shows its GPU idle")
	assert.Contains(t, util, "heidi~odd|7|", "the well-formed item of a malformed NVIDIA_VISIBLE_DEVICES")
	assert.NotContains(t, util, "erin~old|4|", "a zombie holds no GPU")

	byGPU := points(out, "node_name", "minor_number", "pid", "container_id", "type", "source")
	assert.Equal(t, map[string]point{"gpu-node-07|4|4001|||": {value: 1}}, byGPU["gpu_used_by_external_process_count"])
	assert.Equal(t, map[string]point{"gpu-node-07|4||" + ctrID(zombie) + "||": {value: 1}}, byGPU["gpu_used_by_zombie_container_count"])
	assert.Equal(t, 1.0, byGPU["zombie_container_count"]["gpu-node-07||||pod_gone|"].value)
	assert.Equal(t, 1.0, byGPU["zombie_container_count"]["gpu-node-07||||pod_finished|"].value, "listed by nobody, logs kept")
	assert.Equal(t, 3.0, byGPU["gpu_attribution_source_errors_total"]["gpu-node-07|||||nvidia_visible_devices"].value, `"bogus", "" and "GPU-"`)
	assert.Equal(t, 0.0, byGPU["gpu_attribution_source_errors_total"]["gpu-node-07|||||pod_resources"].value)
}

type deviceValue struct{ util, mem float64 }

func deviceValues(md pmetric.Metrics) map[string]deviceValue {
	out := map[string]deviceValue{}
	gpus := readGPUs(md)
	for i := range gpus {
		out[gpus[i].minor] = deviceValue{util: gpus[i].util, mem: gpus[i].memUtil}
	}
	return out
}

// TestZombieNeedsTime: a container whose pod is gone is a zombie only zombie_after later.
func TestZombieNeedsTime(t *testing.T) {
	batch := gpuBatch(t, scenario)
	e := newTestEnv(t, testHost(), startKubelet(t, idsOf(batch)))
	byGPU := points(e.process(batch), "node_name", "type")
	assert.Equal(t, 0.0, byGPU["zombie_container_count"]["gpu-node-07|pod_gone"].value)
	assert.Empty(t, byGPU["gpu_used_by_zombie_container_count"])
	assert.Contains(t, points(e.process(batch), "job_name")["task_gpu_percent"], "erin~old", "until then it is a task")

	e.advance(5*time.Minute - time.Second)
	e.refresh()
	assert.Equal(t, 0.0, points(e.process(batch), "node_name", "type")["zombie_container_count"]["gpu-node-07|pod_gone"].value)
	e.advance(time.Second)
	e.refresh()
	assert.Equal(t, 1.0, points(e.process(batch), "node_name", "type")["zombie_container_count"]["gpu-node-07|pod_gone"].value)
}

// TestKubeletUnavailable: missing, refusing or hanging from the start, the kubelet costs failed
// refreshes, one log line and a counter, and a batch never waits on it. Without a socket the node
// has no kubelet: the environment and the processes decide (golden no-kubelet). A socket that
// refuses or hangs is a kubelet that has not answered yet: which GPUs it manages is unknown, so
// no GPU shows a holder rather than the environment's or the processes' guess (golden
// kubelet-down); processes outside pods and zombies still show. Until issue 31 the environment
// and the processes decided here too, and showed a pod on a GPU the kubelet had given another.
func TestKubeletUnavailable(t *testing.T) {
	batch := gpuBatch(t, scenario)
	ids := idsOf(batch)
	cases := map[string]struct {
		kubelet func(t *testing.T) *podresourcestest.Server
		golden  string
		log     string
	}{
		"missing": {func(*testing.T) *podresourcestest.Server { return nil }, "no-kubelet", "GPU allocations come from the other sources"},
		"refusing": {func(t *testing.T) *podresourcestest.Server {
			socket := filepath.Join(socketDir(t), "kubelet.sock")
			l, err := net.Listen("unix", socket)
			require.NoError(t, err)
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			require.NoError(t, l.Close())
			return &podresourcestest.Server{Socket: socket}
		}, "kubelet-down", "does not answer"},
		"hanging": {func(t *testing.T) *podresourcestest.Server {
			srv := startKubelet(t, ids)
			srv.Hang(true)
			return srv
		}, "kubelet-down", "does not answer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, testHost(), tc.kubelet(t), func(cfg *Config) { cfg.PodResources.Timeout = 100 * time.Millisecond })
			e.advance(5 * time.Minute)
			e.refresh()
			out := e.process(batch)
			compareGolden(t, tc.golden, withoutSourceErrors(out))

			assert.Positive(t, points(out, "node_name", "source")["gpu_attribution_source_errors_total"]["gpu-node-07|pod_resources"].value)
			assert.Equal(t, 1, e.logs.FilterMessageSnippet(tc.log).Len())
			util := points(out, "job_name", "minor_number")["task_gpu_percent"]
			assert.NotContains(t, util, "grace~queued|6", "an idle holder is known to the kubelet only")
			if tc.golden == "no-kubelet" {
				assert.Contains(t, util, "alice~resnet|0", "the processes say who is on the GPU")
				assert.Contains(t, util, "frank~sweep|5", "the environment")
				assert.NotContains(t, points(out, "node_name")["gpu_attribution_kubelet_ready"], "gpu-node-07", "no kubelet, no readiness")
			} else {
				assert.Empty(t, util, "a kubelet that never answered: nobody's guess")
				assert.Equal(t, 0.0, points(out, "node_name")["gpu_attribution_kubelet_ready"]["gpu-node-07"].value)
				byGPU := points(out, "node_name", "minor_number", "pid")
				assert.Equal(t, 1.0, byGPU["gpu_used_by_external_process_count"]["gpu-node-07|4|4001"].value, "the host process is what it is")
			}
		})
	}
}

// withoutSourceErrors is md without the error counter, whose pod_resources value depends on how
// many refreshes failed.
func withoutSourceErrors(in pmetric.Metrics) pmetric.Metrics {
	md := pmetric.NewMetrics()
	in.CopyTo(md)
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool { return m.Name() == "gpu_attribution_source_errors_total" })
		}
	}
	return md
}

// TestTaskThatEnds: a holder whose container stops leaves at the next batch (a NoRecordedValue
// end), without waiting for a refresh or for metric_expiration.
func TestTaskThatEnds(t *testing.T) {
	batch := gpuBatch(t, scenario)
	host := testHost()
	e := newTestEnv(t, host, startKubelet(t, idsOf(batch)))
	require.Contains(t, points(e.process(batch), "job_name")["task_gpu_percent"], "grace~queued")

	idleCgroup := filepath.Join(e.root, "sys/fs/cgroup", host.Pods[idle-1].Containers[0].CgroupPath)
	require.NoError(t, os.RemoveAll(idleCgroup))
	got := points(e.process(batch), "job_name")["task_gpu_percent"]
	assert.Equal(t, point{absent: true}, got["grace~queued"], "the series ends")
	assert.False(t, got["alice~resnet"].absent, "the others go on")
	assert.NotContains(t, points(e.process(batch), "job_name")["task_gpu_percent"], "grace~queued", "and is not sent again")
}

// TestOtherBatchesPassThrough: the task receiver's batch (no GPUs) is not touched, so the
// order in which receivers' batches arrive does not matter.
func TestOtherBatchesPassThrough(t *testing.T) {
	e := newTestEnv(t, testHost(), nil)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("job_name", "alice~resnet")
	rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("task_cpu_percent")
	before := pmetric.NewMetrics()
	md.CopyTo(before)
	out, err := e.attr.processMetrics(t.Context(), md)
	require.NoError(t, err)
	assert.NoError(t, pmetrictest.CompareMetrics(before, out))
}

// FuzzParseVisibleDevices: whatever a variable holds, alone or beside the others, every id
// taken is an index or a UUID, and nothing panics.
func FuzzParseVisibleDevices(f *testing.F) {
	for _, s := range []string{"0,1", "GPU-abc,MIG-def", "all", "none", "void", "", "7,bogus,,GPU-", " 3 , 4 ", "GPU-4B2C1A9F8D3E6F7A,1", "-1"} {
		f.Add(s, uint8(0))
	}
	variables := []string{"NVIDIA_VISIBLE_DEVICES", "PAI_AMD_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}
	f.Fuzz(func(t *testing.T, v string, which uint8) {
		env := map[string]string{variables[int(which)%len(variables)]: v}
		if which >= 128 { // the others set too: HIP's indices count ROCR's UUIDs
			for _, name := range variables {
				env[name] = v
			}
		}
		visible, malformed := readVisibleDevices(env)
		for source, count := range malformed {
			if count <= 0 {
				t.Fatalf("%s: count %d", source, count)
			}
		}
		for source, ids := range visible {
			for _, d := range ids {
				if !isIndex(d) && !hasIDPrefix(d, "GPU-", "MIG-") {
					t.Fatalf("%s: %q accepted from %q", source, d, v)
				}
			}
		}
	})
}

// TestProcessThatExited: a GPU process whose /proc entry is gone by the time it is read (it
// exited after NVML listed it) is counted as a read error, not reported as external as OpenPAI
// did.
func TestProcessThatExited(t *testing.T) {
	batch := gpuBatch(t, scenario)
	e := newTestEnv(t, testHost(), startKubelet(t, idsOf(batch)))
	require.NoError(t, os.RemoveAll(filepath.Join(e.root, "proc", "4001")))
	byGPU := points(e.process(batch), "node_name", "pid", "source")
	assert.Empty(t, byGPU["gpu_used_by_external_process_count"])
	assert.Equal(t, 1.0, byGPU["gpu_attribution_source_errors_total"]["gpu-node-07||process"].value)
}

// TestAttributionGPM: on Hopper each task gets GPM's activity of what it holds: the device's on
// a GPU it holds alone, the slice's on a MIG slice; on a time-sliced GPU its share of the SM
// activity by its processes' SM utilization, and no tensor or DRAM activity (GPM measures the
// device: which process kept those busy is unknown). The A100 has no GPM: none at all.
func TestAttributionGPM(t *testing.T) {
	batch, err := gpureceivertest.SimulatedIntervalBatch("testdata/scenarios/node-h100.yaml")
	require.NoError(t, err)
	ids := idsOf(batch)
	e := newTestEnv(t, testHost(), startKubelet(t, ids))
	out := e.process(batch)
	byJob := points(out, "job_name", "minor_number", "mig_uuid")
	sm, tensor, dram := byJob["task_gpu_sm_active_percent"], byJob["task_gpu_tensor_active_percent"], byJob["task_gpu_dram_active_percent"]

	gpus := readGPUs(batch)
	activity := func(minor, gi string) gpmActivity {
		t.Helper()
		for i := range gpus {
			if gpus[i].minor == minor {
				a, ok := gpus[i].findActivity(gi)
				require.True(t, ok, "GPM of GPU %s instance %q", minor, gi)
				return a
			}
		}
		require.FailNow(t, "no GPU "+minor)
		return gpmActivity{}
	}
	for _, gpu := range []string{"0", "1"} {
		a := activity(gpu, "")
		require.True(t, a.hasSM && a.hasTensor && a.hasDRAM)
		assert.Equal(t, a.sm, sm["alice~resnet|"+gpu+"|"].value, "an exclusive GPU: the device's SM activity")
		assert.Equal(t, a.tensor, tensor["alice~resnet|"+gpu+"|"].value)
		assert.Equal(t, a.dram, dram["alice~resnet|"+gpu+"|"].value)
	}
	assert.Greater(t, tensor["alice~resnet|1|"].value, 5*tensor["alice~resnet|0|"].value, "GPU 1 is tensor bound")

	shared := activity("2", "")
	assert.Positive(t, shared.sm)
	assert.InDelta(t, shared.sm*30/40, sm["bob~explore|2|"].value, 1e-9, "bob's processes ran 30 of the GPU's 40 SM percent")
	assert.InDelta(t, shared.sm*10/40, sm["team-c/notebook-carol|2|"].value, 1e-9)
	for _, job := range []string{"bob~explore|2|", "team-c/notebook-carol|2|"} {
		assert.NotContains(t, tensor, job, "not divisible on a shared GPU")
		assert.NotContains(t, dram, job, "not divisible on a shared GPU")
	}

	migKey := "dave~bert|3|" + ids[3].MIG[0]
	var gi string
	for i := range gpus {
		for _, m := range gpus[i].migs {
			if m.uuid == ids[3].MIG[0] {
				gi = m.gi
			}
		}
	}
	require.NotEmpty(t, gi)
	slice := activity("3", gi)
	assert.Positive(t, slice.sm, "the busy slice")
	assert.Equal(t, slice.sm, sm[migKey].value, "a MIG slice: the instance's")
	assert.Equal(t, slice.tensor, tensor[migKey].value)
	assert.NotContains(t, sm, "dave~bert|3|", "the MIG pod holds its slice, not the GPU")
	assert.Equal(t, 0.0, sm["grace~queued|6|"].value, "an idle holder: its GPU's SMs idle")

	// The same node's batch without GPM in this processor ends the series (staleness markers).
	a100Batch := gpuBatch(t, scenario)
	for name, pts := range points(e.process(a100Batch), "job_name") {
		if strings.HasSuffix(name, "_active_percent") {
			for job, pt := range pts {
				assert.True(t, pt.absent, "%s of %s ends without GPM", name, job)
			}
		}
	}
	fresh := newTestEnv(t, testHost(), startKubelet(t, idsOf(a100Batch)))
	a100 := points(fresh.process(a100Batch), "job_name")
	for _, name := range []string{"task_gpu_sm_active_percent", "task_gpu_tensor_active_percent", "task_gpu_dram_active_percent"} {
		assert.Empty(t, a100[name], "%s without GPM", name)
	}
}

// TestProcessInNestedCgroup: a GPU process in a cgroup below its container's (kube-proxy makes
// one; so do systemd and nested runtimes inside a container, as real /proc/<pid>/cgroup captures
// show) belongs to that container, not to the node.
func TestProcessInNestedCgroup(t *testing.T) {
	batch := gpuBatch(t, scenario)
	host := testHost()
	e := newTestEnv(t, host, startKubelet(t, idsOf(batch)))
	nested := "0::" + host.Pods[trainer-1].Containers[0].CgroupPath + "/init.scope\n"
	for _, pid := range []string{"1001", "1002"} {
		require.NoError(t, os.WriteFile(filepath.Join(e.root, "proc", pid, "cgroup"), []byte(nested), 0o600))
	}
	assert.Contains(t, points(e.process(batch), "job_name")["task_gpu_percent"], "alice~resnet")
	external := points(e.process(batch), "node_name", "pid")["gpu_used_by_external_process_count"]
	assert.Contains(t, external, "gpu-node-07|4001", "the node's own GPU process")
	assert.NotContains(t, external, "gpu-node-07|1001")
	assert.NotContains(t, external, "gpu-node-07|1002")
}
