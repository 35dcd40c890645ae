// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostfixture"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// copyHost gives a test its own copy of a fixture host to damage.
func copyHost(tb testing.TB, name string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), name)
	require.NoError(tb, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "hosts", name))))
	return dir
}

// metricsByName indexes data points by metric name; the attributes of the resource that holds
// them come along, so a test can find one container's series.
type point struct {
	resource map[string]any
	attrs    map[string]any
	value    float64
	ended    bool // a NoRecordedValue point: the series stopped
}

func pointsByName(md pmetric.Metrics) map[string][]point {
	out := map[string][]point{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := rm.Resource().Attributes().AsRaw()
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					continue
				}
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					out[m.Name()] = append(out[m.Name()], point{res, dp.Attributes().AsRaw(), v, dp.Flags().NoRecordedValue()})
				}
			}
		}
	}
	return out
}

func readErrors(points map[string][]point) map[string]float64 {
	out := map[string]float64{}
	for _, p := range points["collector_read_errors_total"] {
		out[p.attrs["source"].(string)] = p.value
	}
	return out
}

func jobNames(points map[string][]point) []string {
	var names []string
	for _, p := range points["task_cpu_seconds_total"] {
		names = append(names, p.resource["job_name"].(string))
	}
	return names
}

// TestUnreadableControllerCostsOnlyItsMetrics: a container whose memory controller cannot be
// read keeps its CPU and block IO metrics and loses only its memory ones.
func TestUnreadableControllerCostsOnlyItsMetrics(t *testing.T) {
	for _, tt := range []struct{ host, job, memoryStat string }{
		{"v2-systemd-crio", "dave~infer", "sys/fs/cgroup/kubepods.slice/kubepods-pod00000015_0000_4000_8000_000000000015.slice/crio-1515151515151515151515151515151515151515151515151515151515151515.scope/memory.stat"},
		{"v1-systemd-containerd", "carol~llama-ft", "sys/fs/cgroup/memory/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod00000001_0000_4000_8000_000000000001.slice/cri-containerd-0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b.scope/memory.stat"},
	} {
		t.Run(tt.host, func(t *testing.T) {
			root := copyHost(t, tt.host)
			require.NoError(t, write(tt.memoryStat, "total_inactive_file x\ninactive_file x\n")(root))
			points := pointsByName(scrapeOnce(t, newStartedScraper(t, testConfig(root))))
			assert.Positive(t, readErrors(points)["cgroup"])
			jobsOf := func(metric string) []string {
				var jobs []string
				for _, p := range points[metric] {
					if name, ok := p.resource["job_name"].(string); ok {
						jobs = append(jobs, name)
					}
				}
				return jobs
			}
			assert.Contains(t, jobsOf("task_cpu_seconds_total"), tt.job, "CPU is still read")
			assert.Contains(t, jobsOf("task_block_in_byte"), tt.job, "block IO is still read")
			assert.NotContains(t, jobsOf("task_mem_usage_byte"), tt.job, "no memory reading of the task whose memory controller is unreadable")
			assert.NotEmpty(t, jobsOf("task_mem_usage_byte"), "the other tasks' memory is still reported")
		})
	}
}

// TestDamagedHost breaks one host file at a time: the scrape goes on, the damaged source is
// counted, and everything that does not depend on it is still reported.
func TestDamagedHost(t *testing.T) {
	const job = "carol~llama-ft"
	cgroupDir := "sys/fs/cgroup/memory/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod00000001_0000_4000_8000_000000000001.slice/cri-containerd-" +
		"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b.scope"
	tests := []struct {
		name       string
		damage     func(root string) error
		source     string
		missing    string // a metric the damage must remove
		jobPresent bool   // the task still reported
	}{
		{"missing meminfo", remove("proc/meminfo"), "meminfo", "node_memory_MemTotal_bytes", true},
		{"truncated stat", write("proc/stat", "cpu  12156 5 36"), "stat", "node_cpu_seconds_total", true},
		{"malformed stat", write("proc/stat", "cpu  1 2 3\ncpu0 x y z\n"), "stat", "node_cpu_seconds_total", true},
		{"malformed net/dev", write("proc/net/dev", "header\nheader\n  eth0: 12 x\n"), "net_dev", "node_network_receive_bytes_total", true},
		{"malformed diskstats", write("proc/diskstats", "254 0 vda x y z\n"), "diskstats", "node_disk_read_bytes_total", true},
		{"missing loadavg", remove("proc/loadavg"), "loadavg", "node_load1", true},
		{"missing uname", remove("proc/sys/kernel/osrelease"), "uname", "node_uname_info", true},
		{"unreadable host network namespace", remove("proc/1/ns"), "net_ns", "task_network_receive_bytes_total", true},
		{"missing mountinfo", remove("proc/1/mountinfo"), "mountinfo", "node_filesystem_size_bytes", true},
		// The tasks stay, without their pod names (job_name from the environment still).
		{"unreadable pod log layout", func(root string) error {
			if err := os.RemoveAll(filepath.Join(root, "var/log/pods")); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, "var/log/pods"), nil, 0o600)
		}, "pod_logs", "", true},
		// One unreadable controller costs its metrics only: the task stays, with its CPU.
		{"malformed memory.stat", write(cgroupDir+"/memory.stat", "cache x\n"), "cgroup", "", true},
		{"truncated process stat", write("proc/2001/stat", "2001 (torch"), "proc_stat", "", true},
		{"vanished process", remove("proc/2001"), "proc", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := copyHost(t, "v1-systemd-containerd")
			require.NoError(t, tt.damage(root))
			s := newStartedScraper(t, testConfig(root))
			points := pointsByName(scrapeOnce(t, s))

			assert.Positive(t, readErrors(points)[tt.source], "collector_read_errors_total{source=%q}", tt.source)
			if tt.missing != "" {
				assert.Empty(t, points[tt.missing])
			}
			assert.Equal(t, tt.jobPresent, contains(jobNames(points), job), "task %s reported", job)
			// What the damage does not touch is still there.
			assert.NotEmpty(t, points["collector_iteration_count_total"])
			others := slices.DeleteFunc(jobNames(points), func(name string) bool { return name == job })
			assert.NotEmpty(t, others, "the other tasks are still reported")
			if tt.source != "meminfo" {
				assert.NotEmpty(t, points["node_memory_MemTotal_bytes"])
			}
		})
	}
}

func remove(rel string) func(string) error {
	return func(root string) error { return os.RemoveAll(filepath.Join(root, rel)) }
}

func write(rel, content string) func(string) error {
	return func(root string) error { return os.WriteFile(filepath.Join(root, rel), []byte(content), 0o600) }
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

// TestRates checks the per-interval rates against counters moved by known amounts.
func TestRates(t *testing.T) {
	root := copyHost(t, "v2-systemd-crio")
	s := newStartedScraper(t, testConfig(root))

	first := pointsByName(scrapeOnce(t, s))
	assert.Empty(t, first["task_cpu_percent"], "no rate without a previous collection")
	assert.Empty(t, first["task_net_in_byte"])

	// 10 s later the container used 15 CPU-seconds and moved 1 MB in, 2 MB out.
	cgroup := filepath.Join(root, "sys/fs/cgroup/kubepods.slice/kubepods-pod00000015_0000_4000_8000_000000000015.slice/crio-"+
		"1515151515151515151515151515151515151515151515151515151515151515.scope")
	require.NoError(t, os.WriteFile(filepath.Join(cgroup, "cpu.stat"), []byte("usage_usec 75000000\n"), 0o600))
	netDev := "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
		"    lo:    9000      10    0    0    0     0          0         0     9000      10    0    0    0     0       0          0\n" +
		"  eth0: 1123456     100    0    0    0     0          0         0 2654321     200    0    0    0     0       0          0\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/3001/net/dev"), []byte(netDev), 0o600))
	advance(s, 10*time.Second)

	second := pointsByName(scrapeOnce(t, s))
	require.Len(t, second["task_cpu_percent"], 2)
	byJob := map[string]map[string]float64{}
	for _, name := range []string{"task_cpu_percent", "task_net_in_byte", "task_net_out_byte"} {
		for _, p := range second[name] {
			job := p.resource["job_name"].(string)
			if byJob[job] == nil {
				byJob[job] = map[string]float64{}
			}
			byJob[job][name] = p.value
		}
	}
	assert.Equal(t, map[string]float64{"task_cpu_percent": 150, "task_net_in_byte": 100_000, "task_net_out_byte": 200_000}, byJob["dave~infer"])
	// The host-network task has CPU but no network rate: the node's traffic is not its own.
	assert.Equal(t, map[string]float64{"task_cpu_percent": 0}, byJob["erin~hvd"])
}

// TestStoppedContainerEnds: when a container stops, each of its series is ended once (a
// NoRecordedValue point, which makes the prometheus exporter drop it at once).
func TestStoppedContainerEnds(t *testing.T) {
	root := copyHost(t, "v2-systemd-crio")
	s := newStartedScraper(t, testConfig(root))
	scrapeOnce(t, s)
	require.NoError(t, os.RemoveAll(filepath.Join(root, v2ContainerDir)))

	ended := map[string]bool{}
	for name, points := range pointsByName(scrapeOnce(t, s)) {
		for _, p := range points {
			if p.ended {
				assert.Equal(t, "dave~infer", p.resource["job_name"], "%s ended", name)
				ended[name] = true
			} else if p.resource["job_name"] == "dave~infer" {
				t.Errorf("%s of the stopped container still reported", name)
			}
		}
	}
	assert.Equal(t, map[string]bool{
		"task_cpu_seconds_total": true, "task_mem_usage_byte": true, "task_mem_limit_byte": true,
		"task_mem_usage_percent": true, "task_network_receive_bytes_total": true,
		"task_network_transmit_bytes_total": true, "task_block_in_byte": true, "task_block_out_byte": true,
	}, ended)

	for _, points := range pointsByName(scrapeOnce(t, s)) {
		for _, p := range points {
			assert.False(t, p.ended, "a series is ended once")
		}
	}
}

// TestResourceFollowsChanges: a container's resource is kept between collections, and rebuilt
// when what it says changes (here the container moves into the node's network namespace).
func TestResourceFollowsChanges(t *testing.T) {
	root := copyHost(t, "v2-systemd-crio")
	s := newStartedScraper(t, testConfig(root))
	hostNetworkOf := func(points map[string][]point) any {
		for _, p := range points["task_cpu_seconds_total"] {
			if p.resource["job_name"] == "dave~infer" {
				return p.resource["host_network"]
			}
		}
		t.Fatal("dave~infer not reported")
		return nil
	}
	first := pointsByName(scrapeOnce(t, s))
	assert.Nil(t, hostNetworkOf(first))
	assert.Len(t, first["task_network_receive_bytes_total"], 1, "dave~infer has its own network")

	link := filepath.Join(root, "proc/3001/ns/net")
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(fmt.Sprintf("net:[%d]", hostfixture.HostNetNS), link))
	second := pointsByName(scrapeOnce(t, s))
	assert.Equal(t, "true", hostNetworkOf(second))
	for _, p := range second["task_network_receive_bytes_total"] {
		assert.True(t, p.ended, "the series of the old resource ends; no new network series")
	}
}

// TestSkipLoggedOnceWhileFailing: every collection counts a skip, but its debug line (with the
// error and the item) is written once while the item keeps failing, and again after it recovered.
func TestSkipLoggedOnceWhileFailing(t *testing.T) {
	root := copyHost(t, "v2-systemd-crio")
	core, logs := observer.New(zapcore.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	s := startScraper(t, testConfig(root), set)
	memoryStat := filepath.Join(root, v2ContainerDir, "memory.stat")
	healthy, err := os.ReadFile(memoryStat)
	require.NoError(t, err)
	skipLines := func() []observer.LoggedEntry {
		return logs.FilterMessageSnippet("Skipped what could not be read").FilterField(zap.String("source", "cgroup")).All()
	}

	require.NoError(t, os.WriteFile(memoryStat, []byte("anon 1\n"), 0o600))
	var last pmetric.Metrics
	for range 3 {
		last = scrapeOnce(t, s)
	}
	assert.Equal(t, float64(3), readErrors(pointsByName(last))["cgroup"], "each collection counted")
	lines := skipLines()
	require.Len(t, lines, 1, "three failing collections, one line")
	assert.Equal(t, "1515151515151515151515151515151515151515151515151515151515151515", lines[0].ContextMap()["item"])
	assert.Contains(t, lines[0].ContextMap()["error"], "memory.stat: no inactive_file")

	require.NoError(t, os.WriteFile(memoryStat, healthy, 0o600))
	scrapeOnce(t, s)
	require.NoError(t, os.WriteFile(memoryStat, []byte("anon 1\n"), 0o600))
	scrapeOnce(t, s)
	assert.Len(t, skipLines(), 2, "failing again after a recovery is logged again")
}
