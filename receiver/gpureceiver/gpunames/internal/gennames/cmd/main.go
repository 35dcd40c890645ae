// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Command gennames writes names.go from metadata.yaml: go generate in package gpunames runs it.
package main

import (
	"log"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames/internal/gennames"
)

func main() {
	data, err := os.ReadFile("../metadata.yaml")
	if err != nil {
		log.Fatal(err)
	}
	src, err := gennames.Source(data)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("names.go", src, 0o644); err != nil { //nolint:gosec // a fixed path in the package go generate runs in
		log.Fatal(err)
	}
}
