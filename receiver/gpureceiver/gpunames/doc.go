// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate go run ./internal/gennames/cmd

// Package gpunames names what the gpu receiver emits: its metrics, its event, the keys of its
// resource and data point attributes, and the values of the attributes that take a fixed set.
// names.go is generated from the receiver's metadata.yaml (go generate), and a test fails when
// the two disagree. Every reader of the receiver's output (the attribution, name profile and
// health filter processors, the health connector, gpureport, gpureceivertest) takes the names
// from here instead of spelling them; a test in package gpureceiver holds that.
//
// It is a package of its own beside the receiver, outside internal/, so that a reader built
// outside this module (another distribution's processor, a dashboard generator) can import the
// names without importing the receiver and its NVML bindings.
package gpunames // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/gpunames"
