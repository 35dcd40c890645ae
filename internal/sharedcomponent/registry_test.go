// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package sharedcomponent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRegistrySharesUntilLastRelease(t *testing.T) {
	var r Registry[string, *int]
	made := 0
	create := func() *int { made++; v := made; return &v }

	a, releaseA := r.Acquire("/sock", create)
	b, releaseB := r.Acquire("/sock", create)
	c, releaseC := r.Acquire("/other", create)
	assert.Same(t, a, b, "one value per key")
	assert.NotSame(t, a, c)
	assert.Equal(t, 2, made)

	assert.False(t, releaseA())
	assert.False(t, releaseA(), "a second release of the same holder does not count")
	assert.True(t, releaseB(), "the last holder closes")
	assert.True(t, releaseC())
	assert.Equal(t, 0, r.Len())

	d, releaseD := r.Acquire("/sock", create)
	assert.NotSame(t, a, d, "after the last release a new value is made")
	assert.True(t, releaseD())
}

func TestRegistryGetOrCreateUntilForget(t *testing.T) {
	var r Registry[string, *int]
	made := 0
	create := func() *int { made++; v := made; return &v }
	a := r.GetOrCreate("cfg", create)
	assert.Same(t, a, r.GetOrCreate("cfg", create), "both faces of a component get one value")
	r.Forget("cfg", a)
	b := r.GetOrCreate("cfg", create)
	assert.NotSame(t, a, b)
	r.Forget("cfg", a)
	assert.Same(t, b, r.GetOrCreate("cfg", create), "forgetting an old value leaves the new one")
}

type closer struct{ closed int }

func (c *closer) Close() { c.closed++ }

func TestOpen(t *testing.T) {
	var r Registry[string, *Opened[*closer]]
	opens := 0
	open := func() (*closer, error) { opens++; return &closer{}, nil }
	a, releaseA, err := Open(&r, "sock", open)
	assert.NoError(t, err)
	b, releaseB, err := Open(&r, "sock", open)
	assert.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, 1, opens)
	releaseA()
	assert.Equal(t, 0, a.closed)
	releaseB()
	assert.Equal(t, 1, a.closed, "the last holder closes")

	_, _, err = Open(&r, "bad", func() (*closer, error) { return nil, assert.AnError })
	assert.ErrorIs(t, err, assert.AnError)
	assert.Equal(t, 0, r.Len(), "a value that failed to open is not kept")
}
