/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/internal/poll"
)

// ManifestsDir is the kustomization that `kubectl apply -k manifests/`
// deploys, relative to the repository root.
const ManifestsDir = "manifests"

// ApplyFieldManager is the field manager of what tests server-side apply.
const ApplyFieldManager = "book-controller-integration-test"

// RenderManifests runs `kubectl kustomize dir` with the kubectl next to the
// control plane binaries (the one on PATH may be too old for the
// kustomization) and returns the objects it prints, in order. A relative
// dir is taken from the repository root.
func (e *Env) RenderManifests(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(RepoRoot(), dir)
	}
	kubectl := e.Kubectl(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s kustomize %s: %v\n%s", kubectl, dir, err, stderr.String())
	}
	objs, err := DecodeManifests(stdout.Bytes())
	if err != nil {
		t.Fatalf("decoding the output of kubectl kustomize %s: %v", dir, err)
	}
	return objs
}

// DecodeManifests splits a multi-document YAML (or JSON) stream into
// objects, skipping empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d has no kind or apiVersion", len(objs)+1)
		}
		objs = append(objs, u)
	}
}

// identityKinds are the objects that make up the controller's identity and
// permissions: what ControllerServiceAccountConfig applies.
var identityKinds = map[schema.GroupKind]string{
	{Kind: "Namespace"}:      "namespaces",
	{Kind: "ServiceAccount"}: "serviceaccounts",
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        "clusterroles",
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: "clusterrolebindings",
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:               "roles",
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        "rolebindings",
}

// IsIdentityObject tells whether obj is a Namespace, ServiceAccount or RBAC
// object: what ApplyIdentityObjects applies.
func IsIdentityObject(obj *unstructured.Unstructured) bool {
	_, ok := identityKinds[obj.GroupVersionKind().GroupKind()]
	return ok
}

// ApplyIdentityObjects server-side applies Namespaces, ServiceAccounts and
// RBAC objects as the admin, Namespaces first, and fails the test on any
// other kind. Applying again is a no-op.
func (e *Env) ApplyIdentityObjects(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	client, err := dynamic.NewForConfig(e.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var namespaces, others []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			namespaces = append(namespaces, obj)
		} else {
			others = append(others, obj)
		}
	}
	for _, obj := range append(namespaces, others...) {
		gk := obj.GroupVersionKind().GroupKind()
		resource, ok := identityKinds[gk]
		if !ok {
			t.Fatalf("ApplyIdentityObjects: %s %s is not a Namespace, ServiceAccount or RBAC object", gk, obj.GetName())
		}
		gvr := obj.GroupVersionKind().GroupVersion().WithResource(resource)
		var ri dynamic.ResourceInterface = client.Resource(gvr)
		if ns := obj.GetNamespace(); ns != "" {
			ri = client.Resource(gvr).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: ApplyFieldManager, Force: true}); err != nil {
			t.Fatalf("applying %s %s: %v", gk, describe(obj), err)
		}
	}
}

// ServiceAccountOf returns the namespace and name of the only ServiceAccount
// in objs.
func ServiceAccountOf(t testing.TB, objs []*unstructured.Unstructured) (namespace, name string) {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetAPIVersion() == "v1" && obj.GetKind() == "ServiceAccount" {
			found = append(found, obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one ServiceAccount in the manifests, found %d", len(found))
	}
	return found[0].GetNamespace(), found[0].GetName()
}

// ImpersonateServiceAccount returns a copy of the admin configuration that
// acts as the ServiceAccount, with the groups the API server gives a real
// ServiceAccount token.
func (e *Env) ImpersonateServiceAccount(namespace, name string) *rest.Config {
	cfg := e.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// WaitForAccess waits until the user of cfg may do each of the attributes
// (RBAC objects take effect when the authorizer's informers see them).
func (e *Env) WaitForAccess(t testing.TB, cfg *rest.Config, attrs ...authorizationv1.ResourceAttributes) {
	t.Helper()
	for _, a := range attrs {
		e.WaitForAllowed(t, fmt.Sprintf("%s to be allowed to %s %s/%s in %q", cfg.Impersonate.UserName, a.Verb, a.Resource, a.Subresource, a.Namespace),
			authorizationv1.SubjectAccessReviewSpec{User: cfg.Impersonate.UserName, Groups: cfg.Impersonate.Groups, ResourceAttributes: &a})
	}
}

// WaitForAllowed waits until the authorizer allows what spec asks.
func (e *Env) WaitForAllowed(t testing.TB, what string, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	Eventually(t, what, func(ctx context.Context) error {
		review, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx,
			&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		return poll.Done(review.Status.Allowed, "not allowed (reason %q)", review.Status.Reason)
	})
}

var (
	saConfigMu sync.Mutex
	saConfigs  = map[*Env]*rest.Config{}
)

// ControllerServiceAccountConfig applies the Namespace, ServiceAccount and
// RBAC objects of manifests/ (the ClusterRole, the leader-election Role and
// their bindings) and returns a configuration that impersonates that
// ServiceAccount: the controller's credentials in the cluster, exactly. The
// objects are applied once per Env; every call returns a fresh copy.
func (e *Env) ControllerServiceAccountConfig(t testing.TB) *rest.Config {
	t.Helper()
	saConfigMu.Lock()
	defer saConfigMu.Unlock()
	if cfg, ok := saConfigs[e]; ok {
		return rest.CopyConfig(cfg)
	}
	var identity []*unstructured.Unstructured
	objs := e.RenderManifests(t, ManifestsDir)
	for _, obj := range objs {
		if IsIdentityObject(obj) {
			identity = append(identity, obj)
		}
	}
	e.ApplyIdentityObjects(t, identity)
	ns, name := ServiceAccountOf(t, objs)
	cfg := e.ImpersonateServiceAccount(ns, name)
	// One rule from each binding, so both are in effect before we return.
	e.WaitForAccess(t, cfg,
		authorizationv1.ResourceAttributes{Verb: "watch", Group: "webapp.ydzs.io", Resource: "books"},
		authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns},
	)
	saConfigs[e] = cfg
	return rest.CopyConfig(cfg)
}

func describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
