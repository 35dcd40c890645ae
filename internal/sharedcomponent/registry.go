// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent gives every component of a collector that asks for the same thing
// (one kubelet socket, one host root) one instance of it, for as long as any of them holds it.
// The collector creates a processor per pipeline and a receiver per signal; without this, two
// metrics pipelines would call the kubelet twice as often. (contrib has the same idea in its
// internal/sharedcomponent, which cannot be imported from outside contrib.)
package sharedcomponent // import "github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"

import "sync"

// Registry holds one value per key: counted by its holders (Acquire), or held until one of them
// forgets it (GetOrCreate, Forget) where the holders are faces of one component that is shut
// down once.
type Registry[K comparable, V comparable] struct {
	mu sync.Mutex
	m  map[K]*entry[V]
}

type entry[V any] struct {
	value V
	refs  int
}

// Acquire returns key's value, made by create when nobody holds one, and the function that gives
// it back. Each holder calls release once; the last one gets last == true and must close the
// value, which the registry has already forgotten (a later Acquire makes a new one).
func (r *Registry[K, V]) Acquire(key K, create func() V) (value V, release func() (last bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key, create)
	e.refs++
	var once sync.Once
	return e.value, func() (last bool) {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			e.refs--
			if e.refs == 0 {
				if r.m[key] == e {
					delete(r.m, key)
				}
				last = true
			}
		})
		return last
	}
}

// GetOrCreate returns key's value, made by create when none is held, until Forget.
func (r *Registry[K, V]) GetOrCreate(key K, create func() V) V {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entry(key, create).value
}

// entry is key's entry, made by create when there is none; r.mu is held.
func (r *Registry[K, V]) entry(key K, create func() V) *entry[V] {
	if r.m == nil {
		r.m = map[K]*entry[V]{}
	}
	e, ok := r.m[key]
	if !ok {
		e = &entry[V]{value: create()}
		r.m[key] = e
	}
	return e
}

// Forget drops key's value if it is still v (not one made for the key since).
func (r *Registry[K, V]) Forget(key K, v V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[key]; ok && e.value == v {
		delete(r.m, key)
	}
}

// Len is how many keys are held, for tests.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// Opened is a shared value that may have failed to open.
type Opened[V any] struct {
	value V
	err   error
}

// Open is Acquire for a value that can fail to open (every holder gets the error) and that its
// last holder closes: release closes it when the last holder gives it back.
func Open[K comparable, V interface{ Close() }](r *Registry[K, *Opened[V]], key K, open func() (V, error)) (V, func(), error) {
	o, release := r.Acquire(key, func() *Opened[V] {
		v, err := open()
		return &Opened[V]{value: v, err: err}
	})
	closeIfLast := func() {
		if release() && o.err == nil {
			o.value.Close()
		}
	}
	if o.err != nil {
		closeIfLast()
		var zero V
		return zero, nil, o.err
	}
	return o.value, closeIfLast, nil
}
