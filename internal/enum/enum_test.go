// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package enum

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

type color string

var colors = []color{"red", "green"}

func TestCheck(t *testing.T) {
	assert.NoError(t, Check(color("green"), colors))
	assert.EqualError(t, Check(color("Green"), colors), `must be one of red, green; got "Green"`)
	assert.EqualError(t, Check(color(""), colors), `must be one of red, green; got ""`)
}
