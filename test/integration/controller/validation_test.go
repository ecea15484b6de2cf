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
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestInvalidBooksAreRejectedByTheAPIServer sends every file in
// manifests/examples/invalid to the real apiserver, the way kubectl would
// (resolving apiVersion and kind through discovery), and expects a rejection
// whose message names the field given in the file's "# expect:" comment.
func TestInvalidBooksAreRejectedByTheAPIServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := env.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)

	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "manifests", "examples", "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d invalid examples, want at least 8", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			expect, validation := directives(data)
			if expect == "" {
				t.Fatalf("%s has no '# expect: FIELD' comment", file)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &obj.Object); err != nil {
				t.Fatalf("not YAML: %v", err)
			}
			obj.SetNamespace(ns)

			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				// kubectl stops here too: the apiserver serves no such version.
				if !strings.Contains(err.Error(), expect) {
					t.Errorf("error %q does not name %q", err, expect)
				}
				return
			}
			_, err = dyn.Resource(mapping.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{FieldValidation: validation})
			if err == nil {
				t.Fatalf("the apiserver accepted an invalid Book")
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("rejected with %v, want 422 Invalid or 400 BadRequest", err)
			}
			if !strings.Contains(err.Error(), expect) {
				t.Errorf("error %q does not name %q", err, expect)
			}
		})
	}
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
		"apiVersion": "webapp.ydzs.io/v1", "kind": "Book",
		"metadata": map[string]any{"name": "pruned", "namespace": ns},
		"spec":     map[string]any{"title": "t", "price": int64(1), "color": "red"},
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

// directives reads "# expect: X" and "# fieldValidation: Y" comment lines.
func directives(data []byte) (expect, validation string) {
	validation = "Strict"
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "# expect:"); ok {
			expect = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "# fieldValidation:"); ok {
			validation = strings.TrimSpace(v)
		}
	}
	return expect, validation
}
