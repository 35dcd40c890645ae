package nodename

import (
	"os"
	"testing"
)

func TestResolve(t *testing.T) {
	got, err := Resolve("gpu-node-7")
	if err != nil || got != "gpu-node-7" {
		t.Fatalf("Resolve(configured) = %q, %v; want the configured name", got, err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("this machine has no host name: %v", err)
	}
	if got, err := Resolve(""); err != nil || got != host {
		t.Fatalf("Resolve(\"\") = %q, %v; want the host name %q", got, err, host)
	}
}
