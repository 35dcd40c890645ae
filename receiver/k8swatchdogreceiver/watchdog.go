// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8swatchdogreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver"

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/otelcol-gpu/otelcol-gpu/internal/latency"
	"github.com/otelcol-gpu/otelcol-gpu/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/k8swatchdogreceiver/internal/metadata"
)

// listTimeout bounds one LIST of pods or nodes. It is the API server's own default request
// timeout: a LIST that has not finished by then will not, and a black-holed connection must not
// stall the informer (OpenPAI's watchdog had no client timeout at all).
const listTimeout = time.Minute

// clients is what the watchdog talks to the API server with. Tests replace newClients to put the
// fake clientset under the informers.
type clients struct {
	kube kubernetes.Interface
	// rest asks /healthz; a real REST client even in unit tests (against httptest), since the
	// fake clientset has none.
	rest rest.Interface
	// host is the API server's host, for k8s_api_server_count's host_ip.
	host string
}

// watchdog is the one instance behind both the metrics and the logs receiver of a component
// (see the registry in factory.go): one set of informers feeds both signals.
type watchdog struct {
	cfg        *Config
	set        receiver.Settings
	logger     *zap.Logger
	newClients func(*Config) (clients, error)
	// logs is nil unless a logs pipeline uses this receiver; status changes are then not watched.
	logs consumer.Logs
	// release removes the watchdog from the shared registry once it is shut down.
	release func()

	startOnce, shutdownOnce sync.Once
	startErr                error
	// runCtx lives from Start to Shutdown: the informers and the log consumer calls use it.
	runCtx  context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup

	clients     clients
	pods, nodes cache.SharedIndexInformer
	// synced is set once both caches have their first full list; until then the cache-based
	// metrics are left out rather than reported from a partial cluster.
	synced atomic.Bool

	// resource is what every metric and log record is emitted under (k8s.cluster.name).
	resource    pcommon.Resource
	mb          *metadata.MetricsBuilder
	errorCounts map[metadata.AttributeType]*atomic.Int64

	// The latency histograms are the only metrics not in metadata.yaml (see internal/latency).
	healthzLatency, listPodsLatency, listNodesLatency *latency.Histogram
	// stale ends the series that disappear between collections (a pod's old phase, a deleted
	// node, a past API-server error), so that the prometheus exporter drops them at once.
	stale *staleness.Tracker

	logsMu sync.Mutex
	lb     *metadata.LogsBuilder
}

// Names of the latency histograms, as OpenPAI's dashboards query them (OpenPAI had the two list
// histograms swapped).
const (
	healthzLatencyName   = "k8s_api_healthz_resp_latency_seconds"
	listPodsLatencyName  = "k8s_api_list_pods_latency_seconds"
	listNodesLatencyName = "k8s_api_list_nodes_latency_seconds"
)

func newWatchdog(cfg *Config, set receiver.Settings) *watchdog {
	started := time.Now()
	w := &watchdog{
		cfg:         cfg,
		set:         set,
		logger:      set.Logger,
		newClients:  newClients,
		mb:          metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		lb:          metadata.NewLogsBuilder(cfg.LogsBuilderConfig, set),
		errorCounts: map[metadata.AttributeType]*atomic.Int64{},
		stale:       staleness.NewTracker(),

		healthzLatency:   latency.New(healthzLatencyName, "Time the API server took to answer GET /healthz (timeouts and errors included).", started),
		listPodsLatency:  latency.New(listPodsLatencyName, "Time of each LIST of all pods, made by the pod informer at start and whenever it has to relist.", started),
		listNodesLatency: latency.New(listNodesLatencyName, "Time of each LIST of all nodes, made by the node informer at start and whenever it has to relist.", started),
	}
	rb := w.mb.NewResourceBuilder()
	if cfg.ClusterName != "" {
		rb.SetK8sClusterName(cfg.ClusterName)
	}
	w.resource = rb.Emit()
	for _, t := range metadata.MapAttributeType {
		w.errorCounts[t] = &atomic.Int64{}
	}
	return w
}

// newClients builds the clients from in-cluster config or a kubeconfig.
func newClients(cfg *Config) (clients, error) {
	rc, err := cfg.api().RESTConfig(metadata.Type.String())
	if err != nil {
		return clients{}, err
	}
	// Protobuf lists are smaller and cheaper to decode than JSON on large clusters.
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return clients{}, err
	}
	probe, err := probeClient(rc)
	if err != nil {
		return clients{}, err
	}
	return clients{kube: kube, rest: probe, host: apiServerHost(rc)}, nil
}

// probeClient is the /healthz client: one of its own, without client-side rate limiting. One
// request per collection needs none, and waiting behind the informers' relists for a token would
// be recorded as API-server latency.
func probeClient(rc *rest.Config) (rest.Interface, error) {
	hc := rest.CopyConfig(rc)
	hc.QPS = -1
	c, err := corev1client.NewForConfig(hc)
	if err != nil {
		return nil, err
	}
	return c.RESTClient(), nil
}

func (w *watchdog) start(ctx context.Context, _ component.Host) error {
	w.startOnce.Do(func() { w.startErr = w.doStart(ctx) })
	return w.startErr
}

func (w *watchdog) doStart(ctx context.Context) error {
	c, err := w.newClients(w.cfg)
	if err != nil {
		return err
	}
	w.clients = c
	strip := newStripper(w.cfg)
	w.pods = w.newInformer(&corev1.Pod{}, w.listPodsLatency,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.kube.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		}, strip)
	w.nodes = w.newInformer(&corev1.Node{}, w.listNodesLatency,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.kube.CoreV1().Nodes().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.kube.CoreV1().Nodes().Watch(ctx, o)
		}, strip)
	if w.logs != nil {
		if _, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: w.onPodUpdate}); err != nil {
			return err
		}
		if _, err := w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: w.onNodeUpdate}); err != nil {
			return err
		}
	}

	// The informers outlive Start's context, which ends when Start returns.
	w.runCtx, w.cancel = context.WithCancel(context.Background())
	for _, inf := range []cache.SharedIndexInformer{w.pods, w.nodes} {
		w.running.Go(func() {
			inf.RunWithContext(w.runCtx)
		})
	}

	syncCtx, cancelSync := context.WithTimeout(ctx, w.cfg.SyncTimeout)
	defer cancelSync()
	if cache.WaitForCacheSync(syncCtx.Done(), w.pods.HasSynced, w.nodes.HasSynced) {
		w.synced.Store(true)
		return nil
	}
	w.logger.Warn("Pods and nodes are not listed yet: starting without them, the informers keep trying and pai_* and k8s_node_gpu_* metrics appear once they have synced",
		zap.Duration("sync_timeout", w.cfg.SyncTimeout))
	return nil
}

// newInformer makes an informer whose LISTs are timed into a latency histogram and counted as
// process_error_log_total{type="parse"} when they fail (OpenPAI's meaning of "parse").
func (w *watchdog) newInformer(obj runtime.Object, hist *latency.Histogram,
	list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext, strip *stripper,
) cache.SharedIndexInformer {
	lw := &timedListWatch{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			ctx, cancel := context.WithTimeout(ctx, listTimeout)
			defer cancel()
			began := time.Now()
			res, err := list(ctx, o)
			hist.Observe(time.Since(began))
			if err != nil {
				w.countError(metadata.AttributeTypeParse)
			}
			return res, err
		},
		watch: watchFn,
	}
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	// Both only fail once the informer has started.
	_ = inf.SetTransform(strip.transform)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		w.logger.Warn("Watching the API server failed, retrying", zap.String("type", r.TypeDescription()), zap.Error(err))
	})
	return inf
}

// timedListWatch lists with plain LISTs. client-go's reflector would otherwise stream the
// initial state through a watch (WatchListClient, on by default since v1.35), and the
// k8s_api_list_*_latency_seconds histograms would have no LIST to time.
type timedListWatch struct {
	list  cache.ListWithContextFunc
	watch cache.WatchFuncWithContext
}

func (lw *timedListWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.list(context.Background(), o)
}

func (lw *timedListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return lw.list(ctx, o)
}

func (lw *timedListWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.watch(context.Background(), o)
}

func (lw *timedListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return lw.watch(ctx, o)
}

// IsWatchListSemanticsUnSupported tells the reflector to use LIST (see timedListWatch).
func (*timedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (w *watchdog) countError(t metadata.AttributeType) {
	w.errorCounts[t].Add(1)
}

func (w *watchdog) shutdown(context.Context) error {
	w.shutdownOnce.Do(func() {
		if w.cancel != nil {
			w.cancel()
		}
		w.running.Wait()
		if w.release != nil {
			w.release()
		}
	})
	return nil
}
