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
)

// RejectsInvalidExamples sends every file in dir (a directory of invalid
// example Books, relative to the repository, such as
// manifests/examples/invalid) to the API server the way kubectl would,
// resolving apiVersion and kind through discovery, and expects a rejection
// whose message names the field given in the file's "# expect:" comment. A
// "# fieldValidation:" comment sets the create's field validation (Strict
// unless it says otherwise). dir must hold at least atLeast files.
func (e *Env) RejectsInvalidExamples(t *testing.T, dir string, atLeast int) {
	t.Helper()
	ctx := context.Background()
	ns := e.Namespace(t)
	cfg := e.RESTConfig()
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

	files, err := filepath.Glob(filepath.Join(RepoRoot(), filepath.FromSlash(dir), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < atLeast {
		t.Fatalf("found %d invalid examples in %s, want at least %d", len(files), dir, atLeast)
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
			t.Logf("rejected: %v", err)
		})
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
