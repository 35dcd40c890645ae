// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeclient is how a component reaches the Kubernetes API server: the three settings
// every such component declares (auth_type, kubeconfig_path, context), their check, and the
// client configuration they make. The components keep the settings as fields of their own
// configuration, so that the keys stay at its top level and confmap names them as they are.
package kubeclient

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-gpu/otelcol-gpu/internal/enum"
)

// AuthType says how a component authenticates to the API server.
type AuthType string

const (
	// AuthTypeServiceAccount uses the pod's service account (in-cluster config).
	AuthTypeServiceAccount AuthType = "serviceAccount"
	// AuthTypeKubeConfig uses a kubeconfig file, for a collector that runs outside the cluster.
	AuthTypeKubeConfig AuthType = "kubeConfig"
)

// AuthTypes are the values an AuthType may take.
var AuthTypes = []AuthType{AuthTypeServiceAccount, AuthTypeKubeConfig}

// Validate accepts one of AuthTypes.
func (a AuthType) Validate() error { return enum.Check(a, AuthTypes) }

// Settings are a component's auth_type, kubeconfig_path and context.
type Settings struct {
	AuthType AuthType
	// KubeConfigPath is the kubeconfig file for auth_type kubeConfig; empty means the usual
	// lookup ($KUBECONFIG, then ~/.kube/config).
	KubeConfigPath string
	// Context selects a kubeconfig context other than the current one.
	Context string
}

// Check reports the settings that do not go together, naming their keys; auth_type's own value
// is its type's to check.
func (s Settings) Check() error {
	switch s.AuthType {
	case AuthTypeServiceAccount:
		if s.KubeConfigPath != "" || s.Context != "" {
			return errors.New("kubeconfig_path and context are only used with auth_type kubeConfig: remove them or set auth_type: kubeConfig")
		}
	case AuthTypeKubeConfig:
		if s.KubeConfigPath != "" {
			if _, err := os.Stat(s.KubeConfigPath); err != nil {
				return fmt.Errorf("kubeconfig_path %q cannot be read: %w", s.KubeConfigPath, err)
			}
		}
	}
	return nil
}

// RESTConfig is the client configuration the settings make, with the user agent
// otelcol-gpu/<component>.
func (s Settings) RESTConfig(component string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch s.AuthType {
	case AuthTypeServiceAccount:
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("auth_type serviceAccount needs to run in a pod with a service account (set auth_type: kubeConfig outside the cluster): %w", err)
		}
	case AuthTypeKubeConfig:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = s.KubeConfigPath
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig_path %q, context %q: %w", s.KubeConfigPath, s.Context, err)
		}
	default:
		return nil, fmt.Errorf("unknown auth_type %q", s.AuthType)
	}
	rc.UserAgent = "otelcol-gpu/" + component
	return rc, nil
}

// serviceAccountNamespace is where Kubernetes mounts the pod's namespace beside its token.
var serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is the namespace the component runs in: the pod's, or the kubeconfig context's
// ("default" when it names none), as kubectl would use it.
func (s Settings) Namespace() (string, error) {
	if s.AuthType == AuthTypeServiceAccount {
		ns, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return "", fmt.Errorf("auth_type serviceAccount: the pod's namespace: %w", err)
		}
		return strings.TrimSpace(string(ns)), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = s.KubeConfigPath
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.Context}).Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig_path %q, context %q: %w", s.KubeConfigPath, s.Context, err)
	}
	return ns, nil
}
