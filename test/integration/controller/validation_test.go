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

package controller_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// TestInvalidBooksAreRejectedByTheAPIServer sends every file in
// manifests/examples/invalid to the real apiserver, which serves
// manifests/crd.yaml here, the way kubectl would, and expects a rejection
// whose message names the field given in the file's "# expect:" comment.
// fork:begin v2
// test/integration/versions does the same with the v2 examples.
// fork:end v2
func TestInvalidBooksAreRejectedByTheAPIServer(t *testing.T) {
	t.Parallel()
	env.RejectsInvalidExamples(t, "manifests/examples/invalid", 8)
}

// TestUnknownSpecFieldIsPrunedWithoutStrictValidation documents the other
// half of the unknown-field rule: without strict field validation, the
// apiserver accepts the Book, drops the field and warns.
func TestUnknownSpecFieldIsPrunedWithoutStrictValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "webapp.ydzs.io/v2", "kind": "Book",
		"metadata": map[string]any{"name": "pruned", "namespace": ns},
		"spec":     map[string]any{"title": "t", "price": map[string]any{"amount": "1", "currency": "XXX"}, "color": "red"},
	}}
	gvr := env.BookResource()
	created, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Ignore"})
	if err != nil {
		t.Fatalf("create with an unknown field and fieldValidation=Ignore: %v", err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "spec", "color"); found {
		t.Errorf("spec.color was stored; the structural schema should prune it")
	}
}
