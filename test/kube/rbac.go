// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// GrantManifests creates the ClusterRoles and Roles of RBAC manifests (deploy/'s files, as they
// are) and binds each to user (named in Start), instead of the service account deploy/ binds
// them to: a component's tests then run with exactly the permissions deploy/ gives it. A Role
// without a namespace goes into namespace, which is made if missing, as kustomize puts it into
// deploy/'s namespace. Every other kind of object in the files is left out.
func (c *Cluster) GrantManifests(user, namespace string, paths ...string) {
	c.tb.Helper()
	ctx := context.Background()
	rbac := c.Admin.RbacV1()
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	for _, path := range paths {
		for _, obj := range c.manifestObjects(path) {
			var err error
			switch obj.GetKind() {
			case "ClusterRole":
				role := convert[rbacv1.ClusterRole](c, obj)
				role.Name = user + ":" + role.Name
				if _, err = rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err == nil {
					_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
						ObjectMeta: metav1.ObjectMeta{Name: role.Name},
						RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
						Subjects:   subjects,
					}, metav1.CreateOptions{})
				}
			case "Role":
				role := convert[rbacv1.Role](c, obj)
				role.Name = user + ":" + role.Name
				if role.Namespace == "" {
					role.Namespace = namespace
				}
				c.ensureNamespace(role.Namespace)
				if _, err = rbac.Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err == nil {
					_, err = rbac.RoleBindings(role.Namespace).Create(ctx, &rbacv1.RoleBinding{
						ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
						RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
						Subjects:   subjects,
					}, metav1.CreateOptions{})
				}
			}
			if err != nil {
				c.tb.Fatalf("grant %s %s of %s to %s: %v", obj.GetKind(), obj.GetName(), path, user, err)
			}
		}
	}
}

func (c *Cluster) ensureNamespace(name string) {
	c.tb.Helper()
	_, err := c.Admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.tb.Fatalf("create namespace %s: %v", name, err)
	}
}

// manifestObjects reads the objects of a YAML file of several documents.
func (c *Cluster) manifestObjects(path string) []*unstructured.Unstructured {
	c.tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		c.tb.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			c.tb.Fatalf("%s: %v", path, err)
		}
		if obj != nil {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

func convert[T any](c *Cluster, obj *unstructured.Unstructured) *T {
	c.tb.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		c.tb.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}
