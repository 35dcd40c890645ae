// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/clock"
	"github.com/otelcol-gpu/otelcol-gpu/internal/xid"
)

// ConditionType is the node condition the connector writes.
const ConditionType corev1.NodeConditionType = "GPUHealthy"

// Reasons of the Events that are not about one fault.
const (
	reasonCleared  = "GPUFaultsCleared"
	reasonReplayed = "XIDReplayed"
)

// writer is the one instance behind every connector the collector makes of one configuration
// (one per pair of pipelines; see the registry in factory.go): one judge, one node informer,
// one candidate for the Lease.
type writer struct {
	cfg    *Config
	logger *zap.Logger
	clock  clock.Clock
	judge  *judge

	metricsOut consumer.Metrics
	logsOut    consumer.Logs
	mb         *metadata.MetricsBuilder

	startOnce, stopOnce sync.Once
	startErr            error
	cancel              context.CancelFunc
	running             sync.WaitGroup
	// wake asks the loop for a pass over the dirty nodes.
	wake chan struct{}

	kube     kubernetes.Interface
	identity string
	nodes    cache.SharedIndexInformer
	// nodeCache is the informer's cache with the writer's own writes in it until the informer
	// has them: what the writer compares with is never older than what it wrote.
	nodeCache cache.MutationCache

	mu sync.Mutex
	// leaderCtx is the context of the current term as the Lease holder; nil when not holding.
	leaderCtx context.Context
	// dirty are the nodes to go over in the next pass; all asks for every node.
	dirty map[string]bool
	all   bool

	// The loop's own: only its goroutine reads and writes them.
	recorder *recorder
	// quarantine and gate are nil unless enabled; devices unless the quarantine takes DRA's
	// devices out alone.
	quarantine *quarantine
	devices    *deviceTaints
	gate       *gate
	// verdicts are the conditions of the nodes the writer went over, for the metrics.
	verdicts map[string]verdict
	faults   map[faultCount]int64
	errors   map[metadata.AttributeOperation]int64
}

type faultCount struct {
	node     string
	kind     metadata.AttributeFault
	replayed bool
}

func newWriter(cfg *Config, set connector.Settings) *writer {
	w := &writer{
		cfg:      cfg,
		logger:   set.Logger,
		clock:    clock.Real{},
		judge:    newJudge(cfg, clock.Real{}),
		mb:       metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		wake:     make(chan struct{}, 1),
		dirty:    map[string]bool{},
		verdicts: map[string]verdict{},
		faults:   map[faultCount]int64{},
		// Every count from 0, so that increase() sees the first error.
		errors: map[metadata.AttributeOperation]int64{metadata.AttributeOperationCondition: 0, metadata.AttributeOperationEvent: 0},
	}
	if cfg.Quarantine.Enabled {
		w.quarantine = newQuarantine(&cfg.Quarantine)
		w.errors[metadata.AttributeOperationNode] = 0
		if cfg.Quarantine.DeviceTaint.Enabled {
			w.devices = newDeviceTaints(&cfg.Quarantine)
			w.errors[metadata.AttributeOperationDeviceTaintRule] = 0
		}
	}
	if cfg.Validation.Enabled {
		w.gate = newGate(&cfg.Validation)
		w.errors[metadata.AttributeOperationNode] = 0
	}
	return w
}

func newClient(cfg *Config) (kubernetes.Interface, error) {
	rc, err := cfg.api().RESTConfig(metadata.Type.String())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func (w *writer) start(_ context.Context, _ component.Host) error {
	w.startOnce.Do(func() { w.startErr = w.doStart() })
	return w.startErr
}

func (w *writer) doStart() error {
	kube, err := newClient(w.cfg)
	if err != nil {
		return err
	}
	w.kube = kube
	namespace := w.cfg.LeaderElection.LeaseNamespace
	if namespace == "" {
		if namespace, err = w.cfg.api().Namespace(); err != nil {
			return fmt.Errorf("leader_election::lease_namespace is empty, and %w", err)
		}
	}
	w.identity = identity()
	w.recorder = newRecorder(kube.CoreV1(), w.identity, w.cfg.Interval)
	w.nodes = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Nodes().Watch(ctx, o)
		},
	}, &corev1.Node{}, 0, cache.Indexers{})
	_ = w.nodes.SetTransform(stripNode) // fails only once the informer runs
	if _, err := w.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.onNode,
		UpdateFunc: func(_, obj any) { w.onNode(obj) },
	}); err != nil {
		return err
	}
	w.nodeCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), w.nodes.GetStore(), cache.MutationCacheOptions{TTL: time.Minute})

	// Everything runs until Shutdown; Start's context ends when Start returns.
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.running.Go(func() { w.nodes.RunWithContext(ctx) })
	syncCtx, cancelSync := context.WithTimeout(ctx, w.cfg.SyncTimeout)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), w.nodes.HasSynced) {
		w.logger.Warn("nodes are not listed yet: starting without them, nothing is written until they are", zap.Duration("sync_timeout", w.cfg.SyncTimeout))
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: w.cfg.LeaderElection.LeaseName, Namespace: namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: w.identity},
	}
	w.running.Go(func() { w.campaign(ctx, lock) })
	w.running.Go(func() { w.loop(ctx) })
	return nil
}

// identity names this collector in the Lease and in the Events: its host (the pod's name in a
// Deployment) and a random part, since two collectors may share a host.
func identity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// stripNode keeps of a node what the writer reads: its name, boot, conditions, annotations,
// cordon and taints, capacity. A node's images and managed fields are most of its size.
func stripNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
		n.Status.VolumesAttached = nil
		n.Status.VolumesInUse = nil
	}
	return obj, nil
}

// campaign stands for the Lease until shutdown: client-go's Run returns when the term ends (the
// Lease could not be renewed), and the writer stands again.
func (w *writer) campaign(ctx context.Context, lock resourcelock.Interface) {
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   w.cfg.LeaderElection.LeaseDuration,
			RenewDeadline:   w.cfg.LeaderElection.RenewDeadline,
			RetryPeriod:     w.cfg.LeaderElection.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            metadata.Type.String(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: w.startedLeading,
				OnStoppedLeading: w.stoppedLeading,
			},
		})
		if err != nil { // the configuration's check has the same rules
			w.logger.Error("leader election", zap.Error(err))
			return
		}
		le.Run(ctx)
	}
}

func (w *writer) startedLeading(ctx context.Context) {
	w.mu.Lock()
	w.leaderCtx, w.all = ctx, true
	w.mu.Unlock()
	w.logger.Info("holding the Lease: this collector writes the nodes' GPU health", zap.String("identity", w.identity))
	w.poke()
}

func (w *writer) stoppedLeading() {
	w.mu.Lock()
	held := w.leaderCtx != nil
	w.leaderCtx = nil
	w.mu.Unlock()
	if held {
		w.logger.Info("no longer holding the Lease: another collector writes the nodes' GPU health")
	}
}

// leading is the current term's context, nil when the writer does not hold the Lease.
func (w *writer) leading() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.leaderCtx == nil || w.leaderCtx.Err() != nil {
		return nil
	}
	return w.leaderCtx
}

func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// markDirty asks for a pass over nodes.
func (w *writer) markDirty(nodes []string) {
	if len(nodes) == 0 {
		return
	}
	w.mu.Lock()
	for _, n := range nodes {
		w.dirty[n] = true
	}
	w.mu.Unlock()
	w.poke()
}

// onNode takes a node's new boot or resolved annotation into the judge, once the writer has
// adopted the node (before, adopt reads them), and asks for a pass over a node the judge has
// data of and the writer has not seen in the API yet.
func (w *writer) onNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	j := w.judge
	j.mu.Lock()
	n := j.nodes[node.Name]
	pass := n != nil && (!n.adopted || n.setNode(node.Status.NodeInfo.BootID, resolvedAt(node), w.clock.Now()))
	j.mu.Unlock()
	if pass {
		w.markDirty([]string{node.Name})
	}
}

// forgetAfter is how long the judge keeps a node the API server does not know after its data
// stopped.
const forgetAfter = time.Hour

// AnnotationResolved is the annotation a person sets on a node, to an RFC 3339 time, to mark
// every GPU fault reported until then resolved (after a GPU reset or a repair without a
// reboot). A fault reported again after that time raises the condition again.
const AnnotationResolved = "otelcol-gpu.io/gpu-health-resolved-at"

func resolvedAt(node *corev1.Node) time.Time {
	t, _ := time.Parse(time.RFC3339, node.Annotations[AnnotationResolved])
	return t
}

func (w *writer) loop(ctx context.Context) {
	tick := w.clock.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			w.pass(false)
		case <-tick.C():
			w.pass(true)
			w.emitMetrics()
		}
	}
}

// pass goes over the dirty nodes (every node: all) and writes what differs, when this collector
// holds the Lease and has listed the nodes.
func (w *writer) pass(all bool) {
	ctx := w.leading()
	if ctx == nil || !w.nodes.HasSynced() {
		return
	}
	w.mu.Lock()
	all = all || w.all
	w.all = false
	names := make([]string, 0, len(w.dirty))
	for n := range w.dirty {
		names = append(names, n)
	}
	clear(w.dirty)
	w.mu.Unlock()
	if all {
		names = w.judge.nodeNames()
	}
	slices.Sort(names)
	for _, name := range names {
		w.reconcile(ctx, name)
	}
	if w.quarantine != nil {
		w.endQuarantinePass(ctx, w.clock.Now())
	}
	if w.gate != nil {
		// Every node on the interval: a node the gate holds may have no agent reporting at all.
		if all {
			names = w.nodes.GetStore().ListKeys()
			slices.Sort(names)
		}
		for _, name := range names {
			if obj, exists, err := w.nodeCache.GetByKey(name); err == nil && exists {
				w.validateNode(ctx, obj.(*corev1.Node), w.clock.Now())
			}
		}
	}
	failed, err := w.recorder.flush(ctx, w.clock.Now())
	w.errors[metadata.AttributeOperationEvent] += int64(failed)
	if err != nil {
		w.logger.Warn("writing Events failed; retrying on the next pass", zap.Error(err))
	}
}

func (j *judge) nodeNames() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	names := make([]string, 0, len(j.nodes))
	for n := range j.nodes {
		names = append(names, n)
	}
	return names
}

// reconcile brings one node's condition and Events up to date with the judge.
func (w *writer) reconcile(ctx context.Context, name string) {
	now := w.clock.Now()
	j := w.judge
	obj, exists, err := w.nodeCache.GetByKey(name)
	if err != nil || !exists {
		// Not a node of this cluster (an edge cluster's agents may send here, or it was
		// deleted): nothing to write, and nothing to remember once its data has stopped.
		delete(w.verdicts, name)
		j.mu.Lock()
		if n := j.nodes[name]; n != nil && now.Sub(n.latest) > forgetAfter {
			delete(j.nodes, name)
		}
		j.mu.Unlock()
		return
	}
	node := obj.(*corev1.Node)
	current := condition(node)

	j.mu.Lock()
	n := j.nodes[name]
	if n == nil {
		j.mu.Unlock()
		return
	}
	adopting := !n.adopted
	if adopting {
		n.adopt(node, current, now)
	}
	n.expire(w.cfg.MaxDataAge)
	v := n.verdict()
	gpus := n.faultyGPUs()
	occurrences := n.takePending()
	j.mu.Unlock()
	if w.quarantine != nil {
		v = escalate(v, w.quarantine.state(node).released, now, w.cfg.Quarantine.EscalationWindow)
		if adopting && current != nil && current.Status == corev1.ConditionFalse {
			w.quarantine.adopt(name, v, now)
		}
	}

	w.verdicts[name] = v
	for _, o := range occurrences {
		w.announce(node, o)
	}

	status := corev1.ConditionFalse
	if v.healthy {
		status = corev1.ConditionTrue
	}
	// healthySince is when the condition turned True, as written.
	var healthySince time.Time
	if current != nil && current.Status == corev1.ConditionTrue {
		healthySince = current.LastTransitionTime.Time
	}
	if current == nil || current.Status != status || current.Reason != v.reason || current.Message != v.message() {
		updated, err := w.writeCondition(ctx, node, current, status, v, now)
		if err != nil {
			w.errors[metadata.AttributeOperationCondition]++
			w.markDirty([]string{name})
			w.logger.Warn("writing the node's GPUHealthy condition failed; retrying on the next pass", zap.String("node", name), zap.Error(err))
			return
		}
		if current != nil && current.Status == corev1.ConditionFalse && v.healthy {
			w.recorder.add(node, "cleared", corev1.EventTypeNormal, reasonCleared,
				fmt.Sprintf("%s is True again: no GPU fault calls for action any more (it was %s: %s)", ConditionType, current.Reason, current.Message), 1, now, now)
		}
		node = updated
		if v.healthy && (current == nil || current.Status != corev1.ConditionTrue) {
			healthySince = now
		}
	}
	if w.quarantine != nil {
		w.quarantineNode(ctx, node, v, gpus, healthySince, now)
	}
}

func condition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == ConditionType {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// announce makes an occurrence an Event and counts it.
func (w *writer) announce(node *corev1.Node, o *occurrence) {
	w.faults[faultCount{node: node.Name, kind: o.f.kind, replayed: o.replayed}] += int64(o.n)
	f := &o.f
	if o.replayed {
		w.recorder.add(node, o.f.eventKey("replayed/"), corev1.EventTypeNormal, reasonReplayed,
			fmt.Sprintf("%s: %s, at %s: reported more than max_data_age (%s) later, as an agent's backlog is after an outage; it informs, and changes nothing on the node",
				f.gpuName(), f.what, o.last.UTC().Format(time.RFC3339), w.cfg.MaxDataAge), o.n, o.first, o.last)
		return
	}
	w.recorder.add(node, f.eventKey(""), corev1.EventTypeWarning, kindOf(f.kind).reason,
		fmt.Sprintf("%s. Recommended action: %s: %s", f.describe(), f.action, f.action.words()), o.n, o.first, o.last)
}

// writeCondition patches the node's GPUHealthy condition alone (a strategic merge by condition
// type leaves the kubelet's and others' conditions as they are).
func (w *writer) writeCondition(ctx context.Context, node *corev1.Node, current *corev1.NodeCondition, status corev1.ConditionStatus, v verdict, now time.Time) (*corev1.Node, error) {
	transition := metav1.NewTime(now)
	if current != nil && current.Status == status {
		transition = current.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type:               ConditionType,
		Status:             status,
		Reason:             v.reason,
		Message:            v.message(),
		LastHeartbeatTime:  metav1.NewTime(now),
		LastTransitionTime: transition,
	}}}})
	if err != nil {
		return nil, err
	}
	updated, err := w.kube.CoreV1().Nodes().PatchStatus(ctx, node.Name, patch)
	if err != nil {
		return nil, err
	}
	_, _ = stripNode(updated)
	w.nodeCache.Mutation(updated)
	if status == corev1.ConditionFalse && (current == nil || current.Status != corev1.ConditionFalse) {
		w.logger.Warn("a GPU fault calls for action", zap.String("node", node.Name), zap.String("reason", v.reason), zap.String("message", v.message()))
	}
	return updated, nil
}

// adopt compares a node the writer has not written yet with its condition in the API: a
// condition already False was written by a writer before this one (a restart, another replica
// that held the Lease) for the states the data shows now, which are therefore not new and get
// no second Event; and an XID it names, which no agent will report again, is carried on until
// the node reboots or a person marks it resolved. j.mu is held.
func (n *nodeHealth) adopt(node *corev1.Node, current *corev1.NodeCondition, now time.Time) {
	n.adopted = true
	n.setNode(node.Status.NodeInfo.BootID, resolvedAt(node), now)
	if current == nil || current.Status != corev1.ConditionFalse {
		return
	}
	for key, o := range n.pending {
		if o.f.kind != metadata.AttributeFaultXid {
			delete(n.pending, key)
		}
	}
	since := current.LastTransitionTime.Time
	if current.Reason != kindOf(metadata.AttributeFaultXid).reason || !since.After(n.resolved) {
		return
	}
	for _, f := range n.faults {
		if f.sticky {
			return
		}
	}
	action, _, _ := strings.Cut(current.Message, ":")
	if Action(action).Validate() != nil {
		action = string(ActionReboot)
	}
	carried := &fault{
		faultKey: faultKey{kind: metadata.AttributeFaultXid},
		what:     "an XID reported before the writer restarted (its Event and the agent's log record have it)",
		action:   Action(action), severity: xid.SeverityWarning,
		since: since, seen: since, open: true, sticky: true,
	}
	n.faults[carried.faultKey] = carried
}

// emitMetrics sends the writer's metrics down the metrics pipelines: whether it holds the
// Lease, and, when it does, the nodes waiting for action and the counts of what it judged.
func (w *writer) emitMetrics() {
	if w.metricsOut == nil {
		return
	}
	now := pcommon.NewTimestampFromTime(w.clock.Now())
	if w.leading() != nil {
		w.mb.RecordGpuHealthWriterLeaderDataPoint(now, 1)
		for name, v := range w.verdicts {
			if !v.healthy {
				w.mb.RecordGpuNodeUnhealthyDataPoint(now, 1, name, v.top.kind, metadata.MapAttributeAction[string(v.action)], metadata.MapAttributeSeverity[string(v.severity)])
			}
		}
		for c, n := range w.faults {
			w.mb.RecordGpuNodeFaultsTotalDataPoint(now, n, c.node, c.kind, c.replayed)
		}
		for op, n := range w.errors {
			w.mb.RecordGpuHealthWriterErrorsTotalDataPoint(now, n, op)
		}
		if w.quarantine != nil {
			w.recordQuarantine(now)
		}
		if w.gate != nil {
			w.recordValidation(now)
		}
	} else {
		w.mb.RecordGpuHealthWriterLeaderDataPoint(now, 0)
	}
	md := w.mb.Emit()
	if err := w.metricsOut.ConsumeMetrics(context.Background(), md); err != nil {
		w.logger.Debug("the metrics pipeline refused the writer's metrics", zap.Error(err))
	}
}

func (w *writer) shutdown(context.Context) error {
	w.stopOnce.Do(func() {
		if w.cancel != nil {
			w.cancel()
		}
		w.running.Wait()
	})
	return nil
}
