// Package nodename resolves the node_name label the receivers put on every series.
package nodename

import (
	"fmt"
	"os"
)

// Resolve returns configured, or this machine's host name when configured is empty (the
// DaemonSet sets node_name from the downward API; a bare host run falls back to its name).
func Resolve(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("node_name is empty and the host name cannot be read: %w", err)
	}
	return name, nil
}
