// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/connector/k8sgpuhealthconnector/internal/metadata"
)

// Where the cluster allocates its GPUs through DRA, the quarantine takes a faulty GPU out of
// service alone: a DeviceTaintRule selects its device (driver, pool and name in its node's
// ResourceSlice), the scheduler gives no new claim a device tainted NoSchedule, and with NoExecute
// the pods using it are evicted. The node and its other GPUs stay in service. The rules are the
// device quarantine's whole state, as the node's annotations are the node quarantine's: each
// carries AnnotationQuarantine (who, when, why, and the node and GPU), and a writer that starts
// lists them by their label.

const (
	// LabelManagedBy, with the value ManagedBy, marks the DeviceTaintRules the quarantine made:
	// the only ones it lists and deletes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "otelcol-gpu-k8s-gpu-health"
	// The device attributes that name a GPU, as NVIDIA's DRA driver publishes them (in its own
	// domain: unqualified, or qualified by the driver's name).
	attributeUUID  = "uuid"
	attributeMinor = "minor"

	resourceGroup           = "resource.k8s.io"
	deviceTaintRuleResource = "devicetaintrules"

	reasonDeviceTainted  = "GPUDeviceTainted"
	reasonDeviceReleased = "GPUDeviceReleased"
)

// deviceTaintRuleVersions are the versions of resource.k8s.io that serve DeviceTaintRules and
// that this client knows, newest first: 1.34 serves v1alpha3 alone, and only with the
// DRADeviceTaints gate and the runtime config.
var deviceTaintRuleVersions = []string{"v1", "v1beta2", "v1alpha3"}

// ruleAPI is DeviceTaintRules at the version the server serves, in v1's types (the versions'
// fields that the quarantine writes are the same).
type ruleAPI interface {
	list(ctx context.Context, opts metav1.ListOptions) ([]resourcev1.DeviceTaintRule, error)
	create(ctx context.Context, rule *resourcev1.DeviceTaintRule) error
	delete(ctx context.Context, name string) error
}

// ruleClient is client-go's typed client of DeviceTaintRules at one version.
type ruleClient[T, L any] interface {
	Create(ctx context.Context, rule *T, opts metav1.CreateOptions) (*T, error)
	List(ctx context.Context, opts metav1.ListOptions) (*L, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// typedRules is one version's client behind ruleAPI: objects go across by their JSON, which the
// versions share for the fields the quarantine uses.
type typedRules[T, L any] struct{ client ruleClient[T, L] }

func (r typedRules[T, L]) list(ctx context.Context, opts metav1.ListOptions) ([]resourcev1.DeviceTaintRule, error) {
	got, err := r.client.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out resourcev1.DeviceTaintRuleList
	if err := convert(got, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

func (r typedRules[T, L]) create(ctx context.Context, rule *resourcev1.DeviceTaintRule) error {
	var out T
	if err := convert(rule, &out); err != nil {
		return err
	}
	_, err := r.client.Create(ctx, &out, metav1.CreateOptions{})
	return err
}

func (r typedRules[T, L]) delete(ctx context.Context, name string) error {
	return r.client.Delete(ctx, name, metav1.DeleteOptions{})
}

func convert(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// discoverRules is the newest version the server serves DeviceTaintRules at (its discovery
// API), nil where it serves none.
func discoverRules(kube kubernetes.Interface) (ruleAPI, string, error) {
	for _, version := range deviceTaintRuleVersions {
		resources, err := kube.Discovery().ServerResourcesForGroupVersion(resourceGroup + "/" + version)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("discovering %s/%s: %w", resourceGroup, version, err)
		}
		if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == deviceTaintRuleResource }) {
			continue
		}
		switch version {
		case "v1":
			return typedRules[resourcev1.DeviceTaintRule, resourcev1.DeviceTaintRuleList]{kube.ResourceV1().DeviceTaintRules()}, version, nil
		case "v1beta2":
			return typedRules[resourcev1beta2.DeviceTaintRule, resourcev1beta2.DeviceTaintRuleList]{kube.ResourceV1beta2().DeviceTaintRules()}, version, nil
		default:
			return typedRules[resourcev1alpha3.DeviceTaintRule, resourcev1alpha3.DeviceTaintRuleList]{kube.ResourceV1alpha3().DeviceTaintRules()}, version, nil
		}
	}
	return nil, "", nil
}

// deviceRef is a device of a ResourceSlice.
type deviceRef struct{ Driver, Pool, Device string }

func (d deviceRef) String() string { return d.Driver + "/" + d.Pool + "/" + d.Device }

// deviceRecord is AnnotationQuarantine's value on a DeviceTaintRule: the node quarantine's
// record, and the node, the GPU and the device.
type deviceRecord struct {
	quarantineRecord
	Node   string `json:"node"`
	GPU    string `json:"gpu"`
	Device string `json:"device"`
}

// heldDevice is a device the quarantine holds: its rule's name and record.
type heldDevice struct {
	rule   string
	record deviceRecord
}

// deviceTaints is the quarantine's part for DRA's devices. Only the writer's loop uses it.
type deviceTaints struct {
	cfg    *DeviceTaintConfig
	dryRun bool
	// api is the rules' API once discovered; nil while the server serves none (the node path).
	api        ruleAPI
	version    string
	discovered bool
	// held are the rules by node: listed once a pass, or the dry run's records.
	held map[string][]heldDevice
	// gpus are the devices of the drivers' ResourceSlices, by node, listed once a pass;
	// slicesForbidden: the collector may not read them (the node path, then).
	gpus            map[string][]sliceGPU
	slicesForbidden bool
	listed          bool
}

// sliceGPU is a GPU in a ResourceSlice: its device, and the attributes that name it.
type sliceGPU struct {
	device      deviceRef
	uuid, minor string
}

func newDeviceTaints(cfg *QuarantineConfig) *deviceTaints {
	return &deviceTaints{cfg: &cfg.DeviceTaint, dryRun: cfg.DryRun, held: map[string][]heldDevice{}, gpus: map[string][]sliceGPU{}}
}

// faultyGPU is the GPU of an open fault: its UUID, or "#<minor>" for a GPU lost before its UUID
// was read, or "" for a fault of the node itself.
type faultyGPU struct{ gpu, minor string }

// faultyGPUs are the GPUs of the node's open faults. j.mu is held.
func (n *nodeHealth) faultyGPUs() []faultyGPU {
	var out []faultyGPU
	for _, f := range n.open() {
		g := faultyGPU{gpu: f.gpu, minor: f.minor}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// loadDeviceRules lists the quarantine's rules for this pass (discovering their API first), so
// that the breaker counts them and the nodes' passes compare with them. It reports whether the
// rules are known (listed): where listing failed, nothing is decided on devices in this pass.
func (w *writer) loadDeviceRules(ctx context.Context) {
	d := w.devices
	if d.listed {
		return
	}
	if !d.discovered {
		api, version, err := discoverRules(w.kube)
		if err != nil {
			w.errors[metadata.AttributeOperationDeviceTaintRule]++
			w.logger.Warn("discovering the API of DeviceTaintRules failed; retrying on the next pass", zap.Error(err))
			return
		}
		d.api, d.version, d.discovered = api, version, true
		if api == nil {
			w.logger.Info("the API server serves no DeviceTaintRules (resource.k8s.io, DRA's device taints): the quarantine takes the node of a faulty GPU, DRA's or not")
		} else {
			w.logger.Info("the quarantine takes a faulty GPU of a DRA driver out alone, with a DeviceTaintRule", zap.String("api_version", resourceGroup+"/"+version))
		}
	}
	if d.api == nil {
		d.listed = true
		return
	}
	if !w.listSliceGPUs(ctx) {
		return
	}
	if d.dryRun {
		// The dry run's records are in memory.
		d.listed = true
		return
	}
	rules, err := d.api.list(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		w.errors[metadata.AttributeOperationDeviceTaintRule]++
		w.logger.Warn("listing the quarantine's DeviceTaintRules failed; retrying on the next pass", zap.Error(err))
		return
	}
	clear(d.held)
	for i := range rules {
		var rec deviceRecord
		if json.Unmarshal([]byte(rules[i].Annotations[AnnotationQuarantine]), &rec) != nil || rec.Node == "" {
			// Not the quarantine's to judge: it says not whose node it is.
			continue
		}
		d.held[rec.Node] = append(d.held[rec.Node], heldDevice{rule: rules[i].Name, record: rec})
	}
	d.listed = true
}

// listSliceGPUs reads the GPUs the drivers publish, by node: one list a pass, from the API
// server's cache (resourceVersion 0), for the faulty GPUs' devices and the breaker's count of
// GPU nodes. Forbidden, the quarantine takes nodes as it did before it took devices out.
func (w *writer) listSliceGPUs(ctx context.Context) bool {
	d := w.devices
	list, err := w.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsForbidden(err):
		if !d.slicesForbidden {
			w.logger.Warn("reading ResourceSlices is forbidden: the quarantine takes the node of a faulty GPU, DRA's or not (deploy/README.md: the quarantine component's permissions)", zap.Error(err))
		}
		d.slicesForbidden = true
		clear(d.gpus)
		return true
	case err != nil:
		w.errors[metadata.AttributeOperationDeviceTaintRule]++
		w.logger.Warn("listing ResourceSlices failed; retrying on the next pass", zap.Error(err))
		return false
	}
	d.slicesForbidden = false
	clear(d.gpus)
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.NodeName == nil || !d.driver(s.Spec.Driver) {
			continue
		}
		node := *s.Spec.NodeName
		for j := range s.Spec.Devices {
			dev := &s.Spec.Devices[j]
			g := sliceGPU{device: deviceRef{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: dev.Name}}
			if a, ok := attribute(dev, s.Spec.Driver, attributeUUID); ok && a.StringValue != nil {
				g.uuid = *a.StringValue
			}
			if a, ok := attribute(dev, s.Spec.Driver, attributeMinor); ok && a.IntValue != nil {
				g.minor = strconv.FormatInt(*a.IntValue, 10)
			}
			d.gpus[node] = append(d.gpus[node], g)
		}
	}
	return true
}

func (d *deviceTaints) driver(name string) bool { return slices.Contains(d.cfg.Drivers, name) }

// attribute is a device's attribute in its driver's domain: unqualified, or qualified by the
// driver's name.
func attribute(dev *resourcev1.Device, driver, name string) (resourcev1.DeviceAttribute, bool) {
	if a, ok := dev.Attributes[resourcev1.QualifiedName(name)]; ok {
		return a, true
	}
	a, ok := dev.Attributes[resourcev1.QualifiedName(driver+"/"+name)]
	return a, ok
}

// recentlyHeld tells whether node had a device quarantined within window, for the breaker.
func (d *deviceTaints) recentlyHeld(node string, now time.Time, window time.Duration) bool {
	return slices.ContainsFunc(d.held[node], func(h heldDevice) bool { return now.Sub(h.record.At) <= window })
}

// gpuDevices are the devices of the node's ResourceSlices that its faulty GPUs are: by UUID, or
// by minor number for a GPU known by that alone. ok is false when a GPU is none of them (a device
// plugin's, or a fault of the node itself): the node path is then the quarantine's.
func (d *deviceTaints) gpuDevices(node string, gpus []faultyGPU) (map[faultyGPU]deviceRef, bool) {
	out := map[faultyGPU]deviceRef{}
	for _, g := range gpus {
		i := slices.IndexFunc(d.gpus[node], func(s sliceGPU) bool {
			if strings.HasPrefix(g.gpu, "#") {
				return s.minor != "" && s.minor == g.minor
			}
			return s.uuid != "" && s.uuid == g.gpu
		})
		if g.gpu == "" || i < 0 {
			return nil, false
		}
		out[g] = d.gpus[node][i].device
	}
	return out, len(out) > 0
}

// ruleName names a device's rule: readable (the node and the device) and unique (a hash of the
// device, whose pool and driver may be long).
func ruleName(node string, d deviceRef) string {
	sum := sha256.Sum256([]byte(node + "\x00" + d.String()))
	readable := strings.Trim(strings.ToLower(node+"-"+d.Device), ".-")
	const most = 253 - len("gpu-unhealthy-") - 1 - 16
	if len(readable) > most {
		readable = strings.TrimRight(readable[:most], ".-")
	}
	return "gpu-unhealthy-" + readable + "-" + hex.EncodeToString(sum[:8])
}

// quarantineDevices applies the policy to a faulty node that the quarantine has not cordoned,
// before the node path: it takes each faulty GPU's device out with a rule while every faulty
// GPU is one. It reports whether it decided for the node: false leaves the node to the node path.
func (w *writer) quarantineDevices(ctx context.Context, node *corev1.Node, s quarantineState, v verdict, gpus []faultyGPU, now time.Time) bool {
	q, d := w.quarantine, w.devices
	if !d.listed {
		// The rules could not be read in this pass: the node waits for the next.
		return true
	}
	held := d.held[node.Name]
	if !slices.Contains(q.cfg.Cordon, v.action) || s.cordoned || (s.released != nil && s.released.By == byPerson && !v.latest.After(s.released.At)) {
		return false
	}
	devices, ok := d.gpuDevices(node.Name, gpus)
	if d.api == nil || d.slicesForbidden || !ok {
		return false
	}
	var missing []faultyGPU
	for _, g := range gpus {
		name := ruleName(node.Name, devices[g])
		if !slices.ContainsFunc(held, func(h heldDevice) bool { return h.rule == name }) {
			missing = append(missing, g)
		}
	}
	if len(missing) == 0 {
		return true
	}
	if len(held) == 0 && !q.allows() {
		return false // the node path refuses it, and reports the breaker
	}
	tainted := false
	for _, g := range missing {
		tainted = w.taintDevice(ctx, node, v, g, devices[g], now) || tainted
	}
	if tainted && len(held) == 0 {
		q.recent++
	}
	return true
}

// taintDevice makes the rule of one faulty GPU's device (in dry run, the record of it), and
// reports whether it did (or would have).
func (w *writer) taintDevice(ctx context.Context, node *corev1.Node, v verdict, g faultyGPU, dev deviceRef, now time.Time) bool {
	d := w.devices
	name := ruleName(node.Name, dev)
	rec := deviceRecord{
		quarantineRecord: quarantineRecord{By: w.by(), At: now, Reason: v.reason, Faults: v.faults, Class: v.class, Action: v.action, Severity: v.severity, Tainted: true},
		Node:             node.Name, GPU: g.gpu, Device: dev.String(),
	}
	what := fmt.Sprintf("tainted device %s (GPU %s) %s=%s:%s with DeviceTaintRule %s, the node left in service, for %s: %s (%s)",
		dev, g.minor, TaintKey, v.action, d.cfg.Effect, name, v.reason, v.action, v.severity)
	if d.dryRun {
		d.held[node.Name] = append(d.held[node.Name], heldDevice{rule: name, record: rec})
		w.quarantineAction(node, metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeDryRun, v, reasonDryRun, "dry run: would have "+what+"; nothing was changed")
		return true
	}
	record, _ := json.Marshal(rec)
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{LabelManagedBy: ManagedBy},
			Annotations: map[string]string{AnnotationQuarantine: string(record)},
		},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &dev.Driver, Pool: &dev.Pool, Device: &dev.Device},
			Taint:          resourcev1.DeviceTaint{Key: TaintKey, Value: string(v.action), Effect: d.cfg.Effect},
		},
	}
	if err := d.api.create(ctx, rule); err != nil && !apierrors.IsAlreadyExists(err) {
		w.errors[metadata.AttributeOperationDeviceTaintRule]++
		w.markDirty([]string{node.Name})
		w.quarantineAction(node, metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeFailed, v, reasonFailed,
			fmt.Sprintf("could not have %s: %v; retried on the next pass", what, err))
		return false
	}
	d.held[node.Name] = append(d.held[node.Name], heldDevice{rule: name, record: rec})
	w.quarantineAction(node, metadata.AttributeQuarantineActionTaintDevice, metadata.AttributeOutcomeApplied, v, reasonDeviceTainted, what+". Faults: "+v.faults)
	return true
}

// releaseDevices returns a healthy node's devices to service once its GPUHealthy has been True
// for uncordon_after: their rules deleted (in dry run, the records forgotten). Every device of
// the node at once, as the node path returns the node: the condition is the node's.
func (w *writer) releaseDevices(ctx context.Context, node *corev1.Node, healthySince, now time.Time) {
	d, after := w.devices, w.quarantine.cfg.UncordonAfter
	held := d.held[node.Name]
	if !d.listed || len(held) == 0 || after == 0 || healthySince.IsZero() || now.Sub(healthySince) < after {
		return
	}
	var kept []heldDevice
	for i := range held {
		h := &held[i]
		r := h.record
		v := verdict{reason: r.Reason, class: r.Class, action: r.Action, severity: r.Severity}
		text := fmt.Sprintf("deleted DeviceTaintRule %s of device %s (GPU %s): GPUHealthy has been True for %s since the quarantine for %s (%s)",
			h.rule, r.Device, r.GPU, w.quarantine.cfg.UncordonAfter, r.Reason, r.Action)
		if d.dryRun {
			w.quarantineAction(node, metadata.AttributeQuarantineActionUntaintDevice, metadata.AttributeOutcomeDryRun, v, reasonDryRun, "dry run: would have "+text)
			continue
		}
		if err := d.api.delete(ctx, h.rule); err != nil && !apierrors.IsNotFound(err) {
			kept = append(kept, *h)
			w.errors[metadata.AttributeOperationDeviceTaintRule]++
			w.markDirty([]string{node.Name})
			w.quarantineAction(node, metadata.AttributeQuarantineActionUntaintDevice, metadata.AttributeOutcomeFailed, v, reasonFailed,
				fmt.Sprintf("could not delete DeviceTaintRule %s of device %s: %v; retried on the next pass", h.rule, r.Device, err))
			continue
		}
		w.quarantineAction(node, metadata.AttributeQuarantineActionUntaintDevice, metadata.AttributeOutcomeApplied, v, reasonDeviceReleased, text)
	}
	if len(kept) == 0 {
		delete(d.held, node.Name)
	} else {
		d.held[node.Name] = kept
	}
}
