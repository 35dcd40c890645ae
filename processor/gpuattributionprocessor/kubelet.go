// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuattributionprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuattributionprocessor"

import (
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/podresources"
)

// kubeletView is what one refresh of the node trusts of the kubelet.
type kubeletView struct {
	// answer is the answer attribution decides by: the kubelet's latest while it is ready, its
	// last complete one for keep_last_answer after that; nil when there is none.
	answer *podresources.Snapshot
	// ready: the kubelet's latest answer is complete.
	ready bool
	// allocatable are the devices the kubelet ever listed as its to hand out, and draGPUs the
	// GPUs (UUIDs, MIG ids) its DRA claims were ever joined to: with no answer to decide by,
	// their GPUs show no holder.
	allocatable []podresources.Device
	draGPUs     []string
	// unknownInventory: the node has a kubelet that never answered completely; which GPUs it
	// manages is unknown, so every GPU is taken as its.
	unknownInventory bool
}

// kubeletState is the refresh loop's judgement of the kubelet across refreshes.
type kubeletState struct {
	lastComplete *podresources.Snapshot
	judged       *podresources.Snapshot // the latest answer judged: each is counted once
	ready        bool
	expired      bool
	since        time.Time // when it stopped being ready
	draGPUs      map[string]struct{}
}

// judgeKubelet reads the kubelet's latest answer against the node's containers (inv's): an
// answer that cannot be complete stands for none, the last complete one is kept for
// keep_last_answer, and each incomplete answer counts as a pod_resources error.
// A node without a kubelet (no socket, no answer ever) has nothing to judge: nil, as where
// pod_resources is not a source.
func (n *node) judgeKubelet(now time.Time, inv *inventory) *kubeletView {
	if n.kubelet == nil || !n.kubelet.Seen() {
		return nil
	}
	if !n.kubelet.Asked() {
		// The node's first refresh runs beside the client's first call: the kubelet's GPUs are
		// unknown until it answers, and there is nothing to judge yet.
		return &kubeletView{unknownInventory: true}
	}
	st := &n.kubeletState
	latest := n.kubelet.Snapshot()
	answering := n.kubelet.Answering()
	complete := answering && n.complete(latest, inv)
	if answering && !complete && latest != st.judged {
		n.incompleteAnswers.Add(1)
	}
	st.judged = latest
	view := &kubeletView{ready: complete}
	if latest != nil {
		view.allocatable = latest.Allocatable
	}
	switch {
	case complete:
		if !st.ready && !st.since.IsZero() {
			n.set.logger.Info("The kubelet's pod-resources answers are complete again")
		}
		st.lastComplete, st.ready, st.expired = latest, true, false
		view.answer = latest
	case st.ready || st.lastComplete == nil && st.since.IsZero():
		st.ready, st.since = false, now
		reason := "it lists pods without this collector's own, or none of the pods it listed whose containers still run: it has not synced its pods yet (a restart)"
		if !answering {
			reason = "it does not answer"
		}
		n.set.logger.Warn("The kubelet is not ready: attribution keeps its last complete answer for keep_last_answer, and no container becomes a zombie until it is ready",
			zap.String("reason", reason), zap.Duration("keep_last_answer", n.set.keepLastAnswer))
		fallthrough
	default:
		if now.Sub(st.since) < n.set.keepLastAnswer {
			view.answer = st.lastComplete
		} else if !st.expired {
			st.expired = true
			n.set.logger.Warn("The kubelet has not been ready for keep_last_answer: GPUs it manages show no holder until it is",
				zap.Duration("keep_last_answer", n.set.keepLastAnswer))
		}
	}
	view.unknownInventory = st.lastComplete == nil
	return view
}

// complete tells whether an answer can be the kubelet's whole allocation. The collector's own
// pod missing says it cannot; where the collector runs outside any pod, an answer that lost
// every pod of the last complete one while containers of those pods still run says it too.
// Zero pods alone does not: static pods are listed at once after a restart.
func (n *node) complete(answer *podresources.Snapshot, inv *inventory) bool {
	if own := n.set.agentPod; own != (podresources.PodKey{}) {
		_, listed := answer.Pods[own]
		return listed
	}
	last := n.kubeletState.lastComplete
	if last == nil || len(last.Pods) == 0 {
		return true
	}
	for pod := range last.Pods {
		if _, listed := answer.Pods[pod]; listed {
			return true
		}
	}
	for _, c := range inv.containers {
		if c.podKnown && c.task {
			if _, wasListed := last.Pods[podresources.PodKey{Namespace: c.pod.Namespace, Pod: c.pod.Name}]; wasListed {
				return false
			}
		}
	}
	return true
}

// rememberDRAGPUs adds the GPUs the view's answer's DRA claims are joined to (through inv's
// reading) to those of earlier answers, and gives the view them all: GetAllocatableResources
// never lists DRA devices.
func (n *node) rememberDRAGPUs(view *kubeletView, inv *inventory) {
	if view == nil {
		return
	}
	defer func() {
		for id := range n.kubeletState.draGPUs {
			view.draGPUs = append(view.draGPUs, id)
		}
	}()
	if view.answer == nil || inv.gpuDevices == nil {
		return
	}
	for _, claims := range view.answer.Claims {
		for _, c := range claims {
			for _, d := range c.Devices {
				if !n.set.dra.gpuDriver(d.Driver) {
					continue
				}
				ids, _ := inv.gpuDevices.claimDevice(d)
				for _, id := range ids {
					if n.kubeletState.draGPUs == nil {
						n.kubeletState.draGPUs = map[string]struct{}{}
					}
					n.kubeletState.draGPUs[id] = struct{}{}
				}
			}
		}
	}
}
