// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package k8sgpuhealthconnector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// eventNamespace holds the Events: the API server keeps those about a cluster-scoped object (a
// node) in default, where kubectl describe node finds them.
const eventNamespace = metav1.NamespaceDefault

// eventTTL is how long the API server keeps an Event after its last write (kube-apiserver's
// --event-ttl default); the recorder forgets an Event it has not written for as long.
const eventTTL = time.Hour

// recorder writes one Event per fault of a node and counts its occurrences in it: the first is
// created at once, later ones patch its count and lastTimestamp at most once per interval, so a
// storm of one XID on one GPU is one Event with a count, not thousands, and a bounded number of
// writes. An Event's name is made from the node and the fault, so a restarted writer finds the
// Event it made before and carries on counting in it.
type recorder struct {
	events   corev1client.EventsGetter
	source   corev1.EventSource
	instance string
	interval time.Duration
	entries  map[string]*eventEntry
}

type eventEntry struct {
	event *corev1.Event
	// pending occurrences are not in the API's count yet; exists: the Event is in the API.
	pending int32
	exists  bool
	written time.Time
}

func newRecorder(events corev1client.EventsGetter, instance string, interval time.Duration) *recorder {
	return &recorder{
		events:   events,
		source:   corev1.EventSource{Component: "otelcol-gpu/k8s_gpu_health"},
		instance: instance,
		interval: interval,
		entries:  map[string]*eventEntry{},
	}
}

// eventName is a name for node's Event about key, valid whatever the node's name.
func eventName(node, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	suffix := fmt.Sprintf(".%016x", h.Sum64())
	if len(node)+len(suffix) > validation.DNS1123SubdomainMaxLength {
		node = node[:validation.DNS1123SubdomainMaxLength-len(suffix)]
	}
	return node + suffix
}

// add counts n occurrences, between first and last (the data's times), of the fault key of node.
func (r *recorder) add(node *corev1.Node, key, typ, reason, message string, n int, first, last time.Time) {
	name := eventName(node.Name, key)
	e := r.entries[name]
	if e == nil {
		e = &eventEntry{event: &corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: eventNamespace},
			InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
			Type:                typ,
			Reason:              reason,
			Source:              r.source,
			ReportingController: "otelcol-gpu.io/k8s-gpu-health",
			ReportingInstance:   r.instance,
			FirstTimestamp:      metav1.NewTime(first),
		}}
		r.entries[name] = e
	}
	e.event.Message = message
	if t := metav1.NewTime(last); t.After(e.event.LastTimestamp.Time) {
		e.event.LastTimestamp = t
	}
	e.pending += int32(n)
}

// flush writes the Events that are due: new ones, and counts not written for an interval. It
// returns the writes that failed; their occurrences stay pending for the next flush.
func (r *recorder) flush(ctx context.Context, now time.Time) (failed int, err error) {
	var errs []error
	for name, e := range r.entries {
		switch {
		case e.pending == 0:
			if now.Sub(e.written) > eventTTL {
				delete(r.entries, name)
			}
			continue
		case e.exists && now.Sub(e.written) < r.interval:
			continue
		}
		if werr := r.write(ctx, e); werr != nil {
			failed++
			errs = append(errs, werr)
			continue
		}
		e.written = now
	}
	return failed, errors.Join(errs...)
}

// write brings e's Event in the API up to date: created when there is none (there was none, or
// the API server has let it expire), else its count patched. An Event that a writer before this
// one made is counted on from its count.
func (r *recorder) write(ctx context.Context, e *eventEntry) error {
	events := r.events.Events(eventNamespace)
	if !e.exists {
		ev := e.event.DeepCopy()
		ev.ObjectMeta = metav1.ObjectMeta{Name: ev.Name, Namespace: ev.Namespace}
		ev.Count += e.pending
		created, err := events.Create(ctx, ev, metav1.CreateOptions{})
		switch {
		case err == nil:
			e.event, e.pending, e.exists = created, 0, true
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating Event %s: %w", ev.Name, err)
		}
		// A writer before this one made it: its count, from the answer to a patch (the writer
		// may patch Events, not read them), is counted on.
		existing, err := r.patch(ctx, ev.Name, map[string]any{"lastTimestamp": e.event.LastTimestamp, "message": e.event.Message})
		if err != nil {
			return err
		}
		e.event, e.exists = existing, true
	}
	patched, err := r.patch(ctx, e.event.Name, map[string]any{
		"count":         e.event.Count + e.pending,
		"lastTimestamp": e.event.LastTimestamp,
		"message":       e.event.Message,
	})
	if apierrors.IsNotFound(err) {
		// Expired since (eventTTL): made again, its count carried on.
		e.exists = false
		return r.write(ctx, e)
	}
	if err != nil {
		return err
	}
	e.event, e.pending = patched, 0
	return nil
}

// patch merges fields into the Event name.
func (r *recorder) patch(ctx context.Context, name string, fields map[string]any) (*corev1.Event, error) {
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	patched, err := r.events.Events(eventNamespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patching Event %s: %w", name, err)
	}
	return patched, nil
}
