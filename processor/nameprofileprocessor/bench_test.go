// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package nameprofileprocessor

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nameprofileprocessor/internal/metadata"
)

// BenchmarkProfiles renames one collection of the demo's 8-GPU node (887 points) per
// iteration; the batch is copied outside the timer, as the pipeline hands each its own.
func BenchmarkProfiles(b *testing.B) {
	collected := demoBatch(b)
	for _, tc := range []struct {
		profile Profile
		version DCGMVersion
	}{{ProfileDCGM, DCGM48}, {ProfileDCGM, DCGM410}, {ProfileSemconv, DCGM48}} {
		name := string(tc.profile)
		if tc.profile == ProfileDCGM {
			name += "-" + string(tc.version)
		}
		b.Run(name, func(b *testing.B) {
			f := NewFactory()
			cfg := f.CreateDefaultConfig().(*Config)
			cfg.Profile = tc.profile
			cfg.DCGMVersion = tc.version
			p, err := f.CreateMetrics(b.Context(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
			require.NoError(b, err)
			batches := make([]pmetric.Metrics, b.N)
			for i := range batches {
				batches[i] = pmetric.NewMetrics()
				collected.CopyTo(batches[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.ConsumeMetrics(b.Context(), batches[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
