// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kube // import "github.com/otelcol-gpu/otelcol-gpu/test/kube"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Built finds a Kubernetes command that build-apiserver.sh builds (kube-apiserver, kubectl,
// kubelet, kube-controller-manager, kube-scheduler, kube-proxy): the path in <COMMAND>_BIN
// (KUBE_APISERVER_BIN for kube-apiserver), else where the script caches it, as the script
// chooses the place (KUBE_CACHE_DIR, else XDG_CACHE_HOME or ~/.cache, then otelcol-gpu).
func Built(command string) (string, error) {
	env := strings.ToUpper(strings.ReplaceAll(command, "-", "_")) + "_BIN"
	path := os.Getenv(env)
	if path == "" {
		dir := os.Getenv("KUBE_CACHE_DIR")
		if dir == "" {
			cache := os.Getenv("XDG_CACHE_HOME")
			if cache == "" {
				home, _ := os.UserHomeDir()
				cache = filepath.Join(home, ".cache")
			}
			dir = filepath.Join(cache, "otelcol-gpu")
		}
		path = filepath.Join(dir, command+"-"+KubeVersion, command)
	}
	fi, err := os.Stat(path)
	if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
		err = fmt.Errorf("%s is not an executable file", path)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s is needed: build it with test/kube/build-apiserver.sh %s (once, cached by version) or set %s: %w", command, KubeVersion, command, env, err)
	}
	return path, nil
}
