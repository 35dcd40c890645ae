// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpureceivertest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testJudge(t *testing.T, change func(*Config)) (*judge, *clock.Fake) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if change != nil {
		change(cfg)
	}
	clk := clock.NewFake(t0)
	return newJudge(cfg, clk), clk
}

// openFaults lists a node's open faults as "<gpu> <kind>[ <code>]", sorted.
func openFaults(j *judge, node string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	if n := j.nodes[node]; n != nil {
		for _, f := range n.open() {
			s := f.gpu + " " + f.kind.String()
			if f.code != 0 {
				s += fmt.Sprint(" ", f.code)
			}
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// pendingCounts are a node's occurrences waiting for Events, by Event key, and takes them.
func pendingCounts(j *judge, node string) map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]int{}
	if n := j.nodes[node]; n != nil {
		for _, o := range n.takePending() {
			key := o.f.eventKey("")
			if o.replayed {
				key = "replayed " + key
			}
			out[key] = o.n
		}
	}
	return out
}

// TestJudgesTheGPUReceiversHealth feeds the gpu receiver's own collection of a simulated node
// with a fault on each of GPUs 1-6 (testdata/faults-scenario.yaml) to the judge: what the agents
// send is what it reads.
func TestJudgesTheGPUReceiversHealth(t *testing.T) {
	md, err := gpureceivertest.SimulatedBatch(filepath.Join("testdata", "faults-scenario.yaml"))
	require.NoError(t, err)
	gpus := gpureceivertest.GPUs(md)
	cfg := createDefaultConfig().(*Config)
	cfg.Faults.PCIeDowngrade.For = 0
	// The receiver stamps its data with the machine's clock.
	j := newJudge(cfg, clock.NewFake(time.Now()))
	assert.Equal(t, []string{"gpu-node-07"}, j.consumeMetrics(md))
	want := []string{
		gpus[1].UUID + " gpu_lost", // ERROR_GPU_IS_LOST
		gpus[2].UUID + " gpu_lost", // ERROR_RESET_REQUIRED
		gpus[3].UUID + " double_bit_ecc",
		gpus[4].UUID + " row_remap_failed",
		gpus[5].UUID + " pcie_downgrade",
		gpus[6].UUID + " row_remap_pending",
	}
	slices.Sort(want)
	assert.Equal(t, want, openFaults(j, "gpu-node-07"))
}

// TestReadsWhatTheAgentsSend: the attributes the judge reads are the gpu receiver's
// (internal/healthdata holds its metrics and event to the receiver's), and its fault kinds and
// actions are metadata.yaml's.
func TestReadsWhatTheAgentsSend(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "receiver", "gpureceiver", "metadata.yaml"))
	require.NoError(t, err)
	var receiver struct {
		ResourceAttributes map[string]any `yaml:"resource_attributes"`
		Attributes         map[string]struct {
			NameOverride string   `yaml:"name_override"`
			Enum         []string `yaml:"enum"`
		} `yaml:"attributes"`
		Events map[string]struct {
			Attributes []string `yaml:"attributes"`
		} `yaml:"events"`
	}
	require.NoError(t, yaml.Unmarshal(data, &receiver))
	for _, a := range []string{gpunames.KeyNodeName, gpunames.KeyUUID, gpunames.KeyMinorNumber} {
		assert.Contains(t, receiver.ResourceAttributes, a)
	}
	var names []string
	for _, a := range receiver.Events[gpunames.EventGPUXID].Attributes {
		name := a
		if o := receiver.Attributes[a].NameOverride; o != "" {
			name = o
		}
		names = append(names, name)
	}
	for _, a := range []string{gpunames.KeyXID, gpunames.KeyResolution, gpunames.KeyXIDSeverity, gpunames.KeyXIDMeaning} {
		assert.Contains(t, names, a, "the XID record's attributes")
	}
	for _, k := range faultKinds {
		if k.condition != "" && k.condition != gpuCount {
			assert.Contains(t, receiver.Attributes[gpunames.KeyCondition].Enum, k.condition, "gpu_health's conditions")
		}
	}
	for _, a := range Actions {
		assert.Contains(t, metadata.MapAttributeAction, string(a), "metadata.yaml's actions")
	}
	assert.Len(t, metadata.MapAttributeAction, len(Actions))
	assert.Len(t, metadata.MapAttributeFault, len(faultKinds))
	for _, k := range faultKinds {
		assert.Equal(t, k.kind, metadata.MapAttributeFault[k.kind.String()])
	}
}

func TestStatesAndTheirFor(t *testing.T) {
	j, _ := testJudge(t, nil)
	g := gpuOn("n1", 0)
	hung := map[string]int64{"nvml": 1}
	j.consumeMetrics(g.health(t0.Add(-2*time.Minute), hung))
	j.consumeMetrics(g.health(t0.Add(-time.Minute), hung))
	assert.Empty(t, openFaults(j, "n1"), "a hang that has not lasted driver_hang::for (2m)")
	assert.Empty(t, pendingCounts(j, "n1"))
	assert.Equal(t, []string{"n1"}, j.consumeMetrics(g.health(t0, hung)))
	assert.Equal(t, []string{g.uuid + " driver_hang"}, openFaults(j, "n1"))
	j.consumeMetrics(g.health(t0.Add(time.Second), hung))
	assert.Equal(t, map[string]int{"driver_hang/" + g.uuid + "/0": 1}, pendingCounts(j, "n1"), "one occurrence however long it lasts")

	// A sample older than the newest changes nothing (data out of order)...
	assert.Empty(t, j.consumeMetrics(g.healthy(t0.Add(-30*time.Second))))
	assert.Equal(t, []string{g.uuid + " driver_hang"}, openFaults(j, "n1"))
	// ...a newer one clears it.
	assert.Equal(t, []string{"n1"}, j.consumeMetrics(g.healthy(t0.Add(2*time.Second))))
	assert.Empty(t, openFaults(j, "n1"))

	// Lost, then back: one fault, gone.
	j.consumeMetrics(g.health(t0.Add(3*time.Second), map[string]int64{"nvml": 2}))
	assert.Equal(t, []string{g.uuid + " gpu_lost"}, openFaults(j, "n1"))
	j.consumeMetrics(g.health(t0.Add(4*time.Second), map[string]int64{"nvml": 0}))
	assert.Empty(t, openFaults(j, "n1"))

	// A disabled kind is not a fault; conditions that call for no action (thermal) neither.
	j2, _ := testJudge(t, func(c *Config) { c.Faults.DoubleBitECC.Enabled = false })
	assert.Equal(t, []string{"n1"}, j2.consumeMetrics(g.health(t0, map[string]int64{"memory_ecc": 1, "thermal": 1, "power": 1, "xid": 2})), "a new node, to be written healthy")
	assert.Empty(t, openFaults(j2, "n1"))
}

// TestNVLinkFabric: the gpu receiver's nvlink condition (a link seen up is down, or the fabric
// is not registered or unhealthy) is a fault once it has lasted nvlink_fabric::for (10m), and
// calls for an NVLink/NVSwitch check.
func TestNVLinkFabric(t *testing.T) {
	j, _ := testJudge(t, nil)
	n, _ := j.node("n1")
	g := gpuOn("n1", 3)
	down := map[string]int64{"nvml": 0, "nvlink": 1}
	j.consumeMetrics(g.health(t0.Add(-10*time.Minute), down))
	j.consumeMetrics(g.health(t0.Add(-time.Minute), down))
	assert.Empty(t, openFaults(j, "n1"), "not yet for 10 minutes")
	j.consumeMetrics(g.health(t0, down))
	assert.Equal(t, []string{g.uuid + " nvlink_fabric"}, openFaults(j, "n1"))
	v := n.verdict()
	assert.Equal(t, "NVLinkFabricUnhealthy", v.reason)
	assert.Equal(t, ActionCheckNVLink, v.action)
	assert.Contains(t, v.message(), "GPU 3 (GPU-n1-3): an NVLink is down, or the GPU's NVLink fabric is not registered or unhealthy")
	j.consumeMetrics(g.health(t0.Add(time.Second), map[string]int64{"nvml": 0, "nvlink": 0}))
	assert.Empty(t, openFaults(j, "n1"), "the link came back")
}

func TestGPUCount(t *testing.T) {
	j, _ := testJudge(t, nil)
	j.consumeMetrics(gpuCountOf("n1", t0, 8, -1))
	assert.Empty(t, openFaults(j, "n1"), "no configured_gpu_count: nothing to compare with")
	j.consumeMetrics(gpuCountOf("n1", t0.Add(time.Second), 7, 8))
	assert.Equal(t, []string{" gpu_missing"}, openFaults(j, "n1"))
	j.consumeMetrics(gpuCountOf("n1", t0.Add(2*time.Second), 8, 8))
	assert.Empty(t, openFaults(j, "n1"))
}

func TestXIDs(t *testing.T) {
	j, clk := testJudge(t, nil)
	g := gpuOn("n1", 3)
	assert.Empty(t, j.consumeLogs(g.xids(t0, 13, "restart_app", "warning", 5)), "the application's fault: no action")
	assert.Empty(t, j.consumeLogs(g.xids(t0, 92, "none", "warning", 1)))
	assert.Empty(t, openFaults(j, "n1"))

	// A storm: one fault, its occurrences counted for one Event.
	assert.Equal(t, []string{"n1"}, j.consumeLogs(g.xids(t0, 79, "reboot", "fatal", 1000)))
	j.consumeLogs(g.xids(t0.Add(time.Second), 79, "reboot", "fatal", 500))
	j.consumeLogs(g.xids(t0, 48, "reset_gpu", "fatal", 1))
	assert.Equal(t, []string{g.uuid + " xid 48", g.uuid + " xid 79"}, openFaults(j, "n1"))
	assert.Equal(t, map[string]int{"xid/" + g.uuid + "/79": 1500, "xid/" + g.uuid + "/48": 1}, pendingCounts(j, "n1"))

	// A batch sent again (an agent delivers at least once) is not counted again.
	assert.Empty(t, j.consumeLogs(g.xids(t0.Add(time.Second), 79, "reboot", "fatal", 500)))
	assert.Empty(t, pendingCounts(j, "n1"))

	// An XID is not reported again: healthy states do not end it.
	j.consumeMetrics(g.healthy(t0.Add(time.Minute)))
	assert.Len(t, openFaults(j, "n1"), 2)

	// Replayed: an edge agent's backlog informs, and raises nothing.
	clk.Advance(3 * time.Hour)
	h := gpuOn("n2", 0)
	assert.Equal(t, []string{"n2"}, j.consumeLogs(h.xids(t0.Add(time.Hour), 79, "reboot", "fatal", 3)))
	assert.Empty(t, j.consumeMetrics(h.health(t0.Add(time.Hour), map[string]int64{"nvml": 2})), "a replayed state")
	assert.Empty(t, openFaults(j, "n2"))
	assert.Equal(t, map[string]int{"replayed xid/" + h.uuid + "/79": 3}, pendingCounts(j, "n2"))
	assert.Empty(t, j.consumeLogs(h.xids(t0.Add(time.Hour), 79, "reboot", "fatal", 3)), "the backlog sent again")
}

func TestRebootAndResolved(t *testing.T) {
	j, clk := testJudge(t, nil)
	g := gpuOn("n1", 0)
	j.consumeLogs(g.xids(t0, 79, "reboot", "fatal", 1))
	j.consumeMetrics(g.health(t0, map[string]int64{"row_remap": 2}))
	n := j.nodes["n1"]
	assert.False(t, n.setNode("boot-1", time.Time{}, clk.Now()), "the first boot seen")
	clk.Advance(time.Minute)
	assert.True(t, n.setNode("boot-2", time.Time{}, clk.Now()), "a reboot")
	assert.Equal(t, []string{g.uuid + " row_remap_failed"}, openFaults(j, "n1"), "a reboot ends XIDs; states end with the data")
	assert.Empty(t, j.consumeLogs(g.xids(t0.Add(30*time.Second), 79, "reboot", "fatal", 1)), "an XID from before the reboot")
	j.consumeLogs(g.xids(clk.Now().Add(time.Second), 79, "reboot", "fatal", 1))
	assert.Len(t, openFaults(j, "n1"), 2, "an XID after it")

	// A person marks the faults resolved (the GPU was replaced): both end, and evidence from
	// before that time raises nothing; a state reported again after it raises it again.
	resolved := clk.Now().Add(2 * time.Second)
	assert.True(t, n.setNode("boot-2", resolved, clk.Now()))
	assert.Empty(t, openFaults(j, "n1"))
	assert.Empty(t, j.consumeMetrics(g.health(resolved, map[string]int64{"row_remap": 2})))
	assert.Empty(t, openFaults(j, "n1"))
	j.consumeMetrics(g.health(resolved.Add(time.Second), map[string]int64{"row_remap": 2}))
	assert.Equal(t, []string{g.uuid + " row_remap_failed"}, openFaults(j, "n1"))
}

func TestExpireVanishedGPU(t *testing.T) {
	j, _ := testJudge(t, nil)
	old, other := gpuOn("n1", 0), gpuOn("n1", 1)
	j.consumeMetrics(old.health(t0.Add(-9*time.Minute), map[string]int64{"nvml": 2}))
	j.consumeLogs(old.xids(t0.Add(-9*time.Minute), 48, "reset_gpu", "fatal", 1))
	j.consumeMetrics(other.healthy(t0))
	n := j.nodes["n1"]
	n.expire(j.cfg.MaxDataAge)
	assert.Len(t, openFaults(j, "n1"), 2)
	j.consumeMetrics(other.healthy(t0.Add(2 * time.Minute)))
	n.expire(j.cfg.MaxDataAge)
	assert.Equal(t, []string{old.uuid + " xid 48"}, openFaults(j, "n1"), "a GPU that no longer reports takes its states along, not its XIDs")
}

func TestVerdict(t *testing.T) {
	j, _ := testJudge(t, func(c *Config) { c.Faults.PCIeDowngrade.For = 0 })
	n, _ := j.node("n1")
	assert.Equal(t, verdict{healthy: true, reason: reasonHealthy}, n.verdict())
	assert.Equal(t, messageHealthy, n.verdict().message())

	g, h := gpuOn("n1", 2), gpuOn("n1", 5)
	j.consumeMetrics(g.health(t0, map[string]int64{"pcie_link": 1, "row_remap": 2}))
	v := n.verdict()
	assert.Equal(t, "RowRemapFailed", v.reason)
	assert.Equal(t, ActionInspectHardware, v.action)
	assert.Equal(t, "inspect_hardware: drain the node and have the GPU inspected: reseat or replace it (a reset will not repair it). "+
		"GPU 2 (GPU-n1-2): a memory row remapping failed; GPU 2 (GPU-n1-2): the PCIe link runs below its width or generation", v.message())

	// An XID names the reason while it is open, whatever else is: a restarted writer knows
	// from the reason alone that one is (see adopt). The action is the largest of all.
	j.consumeLogs(h.xids(t0.Add(time.Second), 48, "reset_gpu", "fatal", 1))
	v = n.verdict()
	assert.Equal(t, "XIDError", v.reason)
	assert.Equal(t, metadata.AttributeFaultXid, v.top.kind)
	assert.Equal(t, ActionInspectHardware, v.action)
	assert.Equal(t, "fatal", string(v.severity))
	assert.True(t, strings.HasPrefix(v.message(), "inspect_hardware: "), v.message())
	assert.Contains(t, v.message(), ". GPU 5 (GPU-n1-5): XID 48, meaning of 48; GPU 2")
	assert.Equal(t, t0.Add(time.Second), v.latest, "the newest fault's beginning")

	for i := range 10 {
		j.consumeLogs(gpuOn("n1", 10+i).xids(t0, 79, "reboot", "fatal", 1))
	}
	assert.True(t, strings.HasSuffix(n.verdict().message(), "; and 5 more"), n.verdict().message())
}

func TestAdopt(t *testing.T) {
	falseSince := metav1.NewTime(t0.Add(-time.Hour))
	condition := func(reason, message string) *corev1.NodeCondition {
		return &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: reason, Message: message, LastTransitionTime: falseSince}
	}
	node := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"}}}

	// Written False for the lost GPU before this writer: the lost GPU is not new.
	j, _ := testJudge(t, nil)
	g := gpuOn("n1", 0)
	j.consumeMetrics(g.health(t0, map[string]int64{"nvml": 2}))
	j.consumeLogs(g.xids(t0, 79, "reboot", "fatal", 1))
	n := j.nodes["n1"]
	n.adopt(node, condition("GPULost", "reboot: ..."), t0)
	assert.Equal(t, map[string]int{"xid/" + g.uuid + "/79": 1}, pendingCounts(j, "n1"), "an XID is new: no agent sends one twice")
	assert.Len(t, n.open(), 2, "nothing carried: an XID is open")

	// Written False for an XID, which no agent reports again: carried on, with its action,
	// until the node reboots.
	j, clk := testJudge(t, nil)
	j.consumeMetrics(g.healthy(t0))
	n = j.nodes["n1"]
	n.adopt(node, condition("XIDError", "check_nvlink: drain the node..."), t0)
	open := n.open()
	require.Len(t, open, 1)
	assert.True(t, open[0].sticky)
	assert.Equal(t, ActionCheckNVLink, open[0].action)
	assert.Equal(t, falseSince.Time, open[0].since)
	assert.Equal(t, "XIDError", n.verdict().reason)
	clk.Advance(time.Minute)
	assert.True(t, n.setNode("boot-2", time.Time{}, clk.Now()))
	assert.Empty(t, n.open())

	// Not carried when a person has marked it resolved since.
	j, _ = testJudge(t, nil)
	j.consumeMetrics(g.healthy(t0))
	n = j.nodes["n1"]
	resolved := node.DeepCopy()
	resolved.Annotations = map[string]string{AnnotationResolved: t0.Format(time.RFC3339)}
	n.adopt(resolved, condition("XIDError", "reboot: ..."), t0)
	assert.Empty(t, n.open())
}
