// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestart starts a control plane, restarts its API server and finds its state kept in etcd.
func TestRestart(t *testing.T) {
	c := Start(t)
	v, err := c.Admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != KubeVersion {
		t.Errorf("server version %s, want %s", v.GitVersion, KubeVersion)
	}
	ns, err := c.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.StopAPIServer()
	if _, err := c.Admin.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered after it was stopped")
	}
	c.StartAPIServer()
	if _, err := c.Admin.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace lost across the restart: %v", err)
	}
}
