module go.opentelemetry.io/contrib/detectors/azure/azurevm

go 1.26.0

// Built only inside the agent's build (distro/_build-agent), whose go.mod replaces
// otelcol-gpu with this repository.
require github.com/otelcol-gpu/otelcol-gpu v0.0.0
