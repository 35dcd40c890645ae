// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/deadline"
)

// errDeadline is what a guarded call returns when it passed call_timeout. NVML's own
// ERROR_TIMEOUT means "a wait timed out", which is what happened from the caller's side.
const errDeadline = nvml.ERROR_TIMEOUT

// guarded runs an NVML call on lane l (each GPU has one; Init, the device count and Shutdown
// share the library's) under g's deadline, which records its latency: a late call keeps running
// (a cgo call cannot be cancelled) and the lane refuses the calls after it until it returns.
func guarded[T any](l *deadline.Lane, g *deadline.Guard, f func() (T, nvml.Return)) (T, nvml.Return) {
	type result struct {
		v   T
		ret nvml.Return
	}
	r, err := deadline.Call(g, l, func() (result, error) {
		v, ret := f()
		return result{v, ret}, nil
	})
	if err != nil {
		return r.v, errDeadline
	}
	return r.v, r.ret
}

// callGPU is the one path of every NVML call on a GPU, wherever it is made (enumeration, event
// registration, collection): refused, without a call, while an earlier call on the GPU is still
// past its deadline; a call that passes its deadline is counted in the GPU's
// gpu_nvml_timeouts_total{call} and logged. The caller holds enumMu.
func callGPU[T any](s *nvmlBackend, g *gpuState, call string, f func() (T, nvml.Return)) (T, nvml.Return) {
	if g.lane.Hung() {
		var zero T
		return zero, errDeadline
	}
	v, ret := guarded(&g.lane, &s.guard, f)
	if ret == errDeadline {
		g.timeouts[call]++
		if s.onLate != nil {
			s.onLate(LateCall{GPU: g.id.index, UUID: g.id.uuid, Call: call})
		}
		s.logger.Warn("NVML call passed its deadline: the GPU is reported down until the call returns; the other GPUs keep reporting",
			zap.Int("gpu", g.id.index), zap.String("uuid", g.id.uuid), zap.String("call", call), zap.Duration("call_timeout", s.cfg.CallTimeout))
	}
	return v, ret
}

// callLibrary makes one of the library's own calls (Init, the driver version, the device
// count, the event set, Shutdown) on its lane; a call past its deadline is logged as a GPU's is.
func callLibrary[T any](l *nvmlLibrary, call string, f func() (T, nvml.Return)) (T, nvml.Return) {
	v, ret := guarded(&l.lane, l.guard, f)
	if ret == errDeadline {
		if l.onLate != nil {
			l.onLate(LateCall{GPU: -1, Call: call})
		}
		l.logger.Warn("NVML call passed its deadline: the library's calls are refused until it returns",
			zap.String("call", call), zap.Duration("call_timeout", l.guard.Timeout))
	}
	return v, ret
}
