module go.opentelemetry.io/contrib/detectors/aws/ec2/v2

go 1.26.0

// Built only inside the agent's build (distro/_build-agent), whose go.mod replaces
// otelcol-gpu with this repository.
require (
	github.com/otelcol-gpu/otelcol-gpu v0.0.0
	go.opentelemetry.io/otel/sdk v1.47.0
)
