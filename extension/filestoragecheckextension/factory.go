// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package filestoragecheckextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension/internal/metadata"
)

// NewFactory returns the file_storage_check extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{Timeout: time.Second}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &checker{cfg: cfg.(*Config), logger: set.Logger}, nil
}
