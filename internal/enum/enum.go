// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package enum checks a setting that must be one of a fixed list of values. Each such setting
// is a named string type whose values are declared once, as constants and a list; its Validate
// calls Check with that list, so the error lists the values from the one place they are
// declared. The collector's configuration check (confmap.Validate) finds that Validate wherever
// the type is used and puts the setting's key before the error.
package enum // import "github.com/otelcol-gpu/otelcol-gpu/internal/enum"

import (
	"fmt"
	"slices"
	"strings"
)

// Check is nil when v is one of allowed, else an error that lists them.
func Check[T ~string](v T, allowed []T) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("must be one of %s; got %q", List(allowed), v)
}

// List writes values for a message: "a, b, c".
func List[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
