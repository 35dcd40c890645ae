// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Track is a Signal played: its value at each time since the start of the scenario.
type Track struct {
	spec Signal
	// seed makes each GPU's random walk its own but reproducible.
	seed uint64

	// The random walk advances from its last position; time only moves forward in a run, so
	// this is O(1) per reading, and a reading earlier than the last one replays from the start.
	mu    sync.Mutex
	rng   *rand.Rand
	steps int64
	value float64
}

// NewTrack plays spec, or the constant fallback when spec is nil; seed makes a random walk
// its own (each GPU's signal its own seed) and reproducible.
func NewTrack(spec *Signal, fallback float64, seed uint64) *Track {
	if spec == nil {
		spec = &Signal{Constant: &fallback}
	}
	return &Track{spec: *spec, seed: seed}
}

// At is the value at t since the start.
func (s *Track) At(t time.Duration) float64 {
	switch {
	case s.spec.Constant != nil:
		return *s.spec.Constant
	case len(s.spec.Step) > 0:
		v := s.spec.Step[0].Value
		for _, p := range s.spec.Step {
			if t >= p.At {
				v = p.Value
			}
		}
		return v
	case s.spec.Sine != nil:
		w := s.spec.Sine
		phase := 2 * math.Pi * float64(t+w.Phase) / float64(w.Period)
		return w.Min + (w.Max-w.Min)*(1+math.Sin(phase))/2
	default:
		return s.walk(t)
	}
}

func (s *Track) walk(t time.Duration) float64 {
	w := s.spec.RandomWalk
	steps := int64(t / w.Every)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng == nil || steps < s.steps {
		s.rng = rand.New(rand.NewPCG(s.seed, 0x5eed))
		s.steps = 0
		s.value = (w.Min + w.Max) / 2
	}
	for ; s.steps < steps; s.steps++ {
		s.value = math.Min(w.Max, math.Max(w.Min, s.value+(2*s.rng.Float64()-1)*w.Step))
	}
	return s.value
}
