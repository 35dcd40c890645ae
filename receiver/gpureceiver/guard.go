// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

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
