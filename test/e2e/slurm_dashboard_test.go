// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/demonode"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"
)

// slurmDashboard is the job dashboard's Slurm variant, which TestDashboards' Kubernetes cluster
// has no data for: TestSlurmDashboard runs it.
const slurmDashboard = "job-slurm.json"

// onSlurmGPM are the Slurm dashboard's queries on GPM (Hopper and newer): empty on the A100
// node's page, not zeros. Keys "<panel title>/<refId>".
var onSlurmGPM = map[string]bool{
	"GPUs of the job/C": true, "GPUs of the job/D": true,
	"SM and tensor activity per GPU/A": true, "SM and tensor activity per GPU/B": true,
}

// onSlurmGPUs are its queries on the job's GPUs: empty for a job that holds none.
var onSlurmGPUs = map[string]bool{
	"GPU utilization (job average)/A": true, "GPUs held/A": true,
	"GPUs of the job/A": true, "GPUs of the job/B": true,
	"GPU utilization per GPU/A": true, "GPU framebuffer per GPU/A": true, "Ranks side by side/A": true,
}

// slurmLabelValues reads a variable's label_values(selector, label) query.
var slurmLabelValues = regexp.MustCompile(`^label_values\((\w+(?:\{[^}]*\})?), *(\w+)\)$`)

// TestSlurmDashboard runs every query of deploy/grafana/job-slurm.json on a real Prometheus
// scraping a Slurm node's page (testdata/slurm-node-page.prom: the contract's Slurm labels; once
// make demo-slurm's agent emits them, its page): the variables come from slurm_job_info, each
// narrowing the next as Grafana fills them; with every job chosen each query has data (GPM's
// none on the A100); each job alone has data on its GPU panels exactly when it holds GPUs; and
// the account variable chooses that account's jobs only, through the join on slurm_job_info.
func TestSlurmDashboard(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "test", "e2e", "testdata", "slurm-node-page.prom"))
	require.NoError(t, err)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
	})}
	go func() { _ = srv.Serve(listener) }()
	t.Cleanup(func() { _ = srv.Close() })
	api := startPrometheus(t, map[string]string{"otelcol-gpu-agent": "http://" + listener.Addr().String() + "/metrics"})
	mc := monitoredCluster{api: api, base: strings.TrimSuffix(api, "/api/v1/query?query=")}
	// Two scrapes: the counters' irate has two samples.
	eventually(t, "two scrapes of the Slurm node", func() bool {
		return series(t, api, `irate(task_cpu_seconds_total[30s])`) > 0 && series(t, api, `slurm_job_info`) > 0
	})

	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", slurmDashboard))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	all := mc.slurmVariables(t, d, nil)
	require.Equal(t, []string{"account", "user", "job"}, sortedVariableNames(d))

	run := func(vars map[string]string, check func(key string, n int, expr string)) {
		mc.slurmPanels(t, d, vars, check)
	}
	t.Run("every job", func(t *testing.T) {
		run(all, func(key string, n int, expr string) {
			if onSlurmGPM[key] {
				assert.Zero(t, n, "GPM's data on the A100: %s", expr)
				return
			}
			assert.Positive(t, n, "no data: %s", expr)
		})
	})

	holders := map[string]bool{}
	for _, id := range mc.labelValues(t, "task_gpu_percent", "slurm_job_id") {
		holders[id] = true
	}
	jobs := mc.labelValues(t, "slurm_job_info", "slurm_job_id")
	require.Len(t, jobs, 7, "the page's jobs")
	require.Len(t, holders, 6, "all but the CPU-only job hold GPUs")
	for _, job := range jobs {
		t.Run("job "+job, func(t *testing.T) {
			vars := map[string]string{"account": all["account"], "user": all["user"], "job": job}
			run(vars, func(key string, n int, expr string) {
				switch {
				case onSlurmGPM[key] || (onSlurmGPUs[key] && !holders[job]):
					assert.Zero(t, n, "%s: %s", job, expr)
				default:
					assert.Positive(t, n, "%s: no data: %s", job, expr)
				}
			})
		})
	}

	// chemistry's jobs: bob's two steps on GPUs 2 and 3, erin's batch and extern steps on GPU 7,
	// erin's CPU-only job; the user and job variables narrow to them.
	chemistry := mc.slurmVariables(t, d, map[string]string{"account": "chemistry"})
	assert.Equal(t, "(bob|erin)", chemistry["user"])
	assert.Equal(t, "(2010|2040|2050)", chemistry["job"])
	held := queryValues(t, api, expand(panelExpr(t, d, "GPUs held", "A"), chemistry))
	assert.Equal(t, []float64{4}, held, "GPUs held by the account's jobs' steps")
	// Grafana's All of user and job is .* (the dashboard's allValue, short with thousands of
	// jobs): the panels' join on slurm_job_info keeps the account's jobs alone.
	allOf := map[string]string{"account": "chemistry", "user": ".*", "job": ".*"}
	held = queryValues(t, api, expand(panelExpr(t, d, "GPUs held", "A"), allOf))
	assert.Equal(t, []float64{4}, held, "GPUs held by the account's jobs' steps, user and job All")
}

// TestSlurmDashboardOnTheDemo runs the Slurm dashboard's queries on the page of `make
// demo-slurm`'s agent (demonode's Slurm node, gpu_attribution's slurm source, the task
// receiver's steps): every panel has data with every job chosen (GPM's none on the A100), and
// each job, all of which hold GPUs, has its GPU panels' data alone.
func TestSlurmDashboardOnTheDemo(t *testing.T) {
	root := repoRoot(t)
	scenario := filepath.Join(root, "distro", "scenarios", "dgx-a100-slurm.yaml")
	jobs, err := demonode.LoadSlurmJobs(filepath.Join(root, "distro", "scenarios", "slurm", "dgx-a100-slurm.yaml"))
	require.NoError(t, err)
	sc, err := gpuscenario.Load(scenario)
	require.NoError(t, err)
	gpus, _, err := demonode.ScenarioGPUs(sc)
	require.NoError(t, err)
	node := filepath.Join(t.TempDir(), "node")
	require.NoError(t, demonode.StartSlurm(node, jobs, gpus))
	t.Setenv("OTELCOL_GPU_DEMO_ROOT", node)
	metrics, _ := startCollectorWithOutput(t, filepath.Join(root, "distro", "demo-slurm.yaml"),
		"receivers::gpu::scenario="+scenario,
		"receivers::gpu::collection_interval=1s",
		"receivers::task/demo::collection_interval=1s",
		"processors::gpu_attribution::refresh_interval=1s",
	)
	api := startPrometheus(t, map[string]string{"otelcol-gpu-agent": metrics})
	mc := monitoredCluster{api: api, base: strings.TrimSuffix(api, "/api/v1/query?query=")}
	eventually(t, "two scrapes of the demo's Slurm steps", func() bool {
		return series(t, api, `irate(task_cpu_seconds_total{slurm_job_id!=""}[30s])`) > 0 &&
			series(t, api, `slurm_job_info`) == len(jobs.Jobs) && series(t, api, `task_gpu_percent{slurm_job_id!=""}`) > 0
	})

	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", slurmDashboard))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	all := mc.slurmVariables(t, d, nil)
	mc.slurmPanels(t, d, all, func(key string, n int, expr string) {
		if onSlurmGPM[key] {
			assert.Zero(t, n, "GPM's data on the A100: %s", expr)
			return
		}
		assert.Positive(t, n, "no data on the demo: %s", expr)
	})
	for _, job := range mc.labelValues(t, "slurm_job_info", "slurm_job_id") {
		vars := map[string]string{"account": all["account"], "user": all["user"], "job": job}
		mc.slurmPanels(t, d, vars, func(key string, n int, expr string) {
			if onSlurmGPUs[key] {
				assert.Positive(t, n, "job %s holds GPUs on the demo: %s", job, expr)
			}
		})
	}
}

// slurmPanels runs every query of the dashboard's panels with vars filled in, and calls check
// with the panel's title/refID, how many series it returned, and the query.
func (mc monitoredCluster) slurmPanels(t *testing.T, d dashboard, vars map[string]string, check func(key string, n int, expr string)) {
	t.Helper()
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			expr := expand(target.Expr, vars)
			require.NotRegexp(t, `\$[A-Za-z_{]`, expr, "a template variable the test does not fill")
			n, err := mc.query(expr)
			require.NoError(t, err, expr)
			check(p.Title+"/"+target.RefID, n, expr)
		}
	}
}

// slurmVariables fills the dashboard's query variables in order from the data, each from the
// values its query finds with the variables before it filled, all values chosen (Grafana's All
// of a multi-value variable: a regex alternation); a variable in fixed takes its value instead.
func (mc monitoredCluster) slurmVariables(t *testing.T, d dashboard, fixed map[string]string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if value, ok := fixed[v.Name]; ok {
			vars[v.Name] = value
			continue
		}
		m := slurmLabelValues.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s: want label_values(selector, label), got %q", v.Name, v.Definition)
		require.True(t, v.Multi, "variable %s chooses several values", v.Name)
		values := mc.labelValues(t, expand(m[1], vars), m[2])
		require.NotEmpty(t, values, "variable %s (%s) has no values", v.Name, v.Definition)
		for i, val := range values {
			values[i] = regexp.QuoteMeta(val)
		}
		vars[v.Name] = "(" + strings.Join(values, "|") + ")"
	}
	return vars
}

func sortedVariableNames(d dashboard) []string {
	var names []string
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			names = append(names, v.Name)
		}
	}
	return names
}

func panelExpr(t *testing.T, d dashboard, title, refID string) string {
	t.Helper()
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			if p.Title == title && target.RefID == refID {
				return target.Expr
			}
		}
	}
	require.Fail(t, fmt.Sprintf("no panel %q with query %s", title, refID))
	return ""
}
