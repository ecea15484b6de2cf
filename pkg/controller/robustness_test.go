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

package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	core "k8s.io/client-go/testing"
)

// Regression tests for what the chaos suite found.

// namespaceTerminatingError is what the API server's NamespaceLifecycle
// admission answers to a create in a namespace being deleted.
func namespaceTerminatingError(name string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", testNamespace))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", testNamespace),
		Field:   "metadata.namespace",
	})
	return err
}

// TestSyncInTerminatingNamespaceIsNotRetried: while a namespace is deleted,
// every create in it is forbidden until the namespace controller deletes the
// Book. Retrying only fails again (a namespace of 500 Books made 658 failed
// syncs in the chaos suite), so the sync gives up without an error and writes
// nothing else; the Book's deletion follows.
func TestSyncInTerminatingNamespaceIsNotRetried(t *testing.T) {
	f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
	f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, namespaceTerminatingError("demo")
	})

	if err := f.sync("demo"); err != nil {
		t.Fatalf("syncHandler: got %v, want nil", err)
	}
	if n := len(f.statusWrites()); n != 0 {
		t.Errorf("status writes: got %d, want 0", n)
	}
	f.expectEvents()

	// Through the worker: the key is forgotten, not requeued.
	f.c.queue.Add(bookKey("demo"))
	if !f.c.processNextWorkItem(t.Context(), 0) {
		t.Fatal("processNextWorkItem returned false on a live queue")
	}
	if n := f.c.queue.NumRequeues(bookKey("demo")); n != 0 {
		t.Errorf("NumRequeues: got %d, want 0", n)
	}

	t.Run("any other Forbidden is still an error", func(t *testing.T) {
		f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
		f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "demo", errors.New("RBAC says no"))
		})
		if err := f.sync("demo"); !apierrors.IsForbidden(err) {
			t.Fatalf("syncHandler: got %v, want the Forbidden error so the Book is retried", err)
		}
	})
}

// TestLongBookName: a Book name may have up to 253 characters, a label value
// only 63. The ConfigMap of a Book with a longer name must still be valid
// (it goes without the book label), or the API server rejects it forever.
func TestLongBookName(t *testing.T) {
	for _, name := range []string{
		strings.Repeat("a", 63),
		strings.Repeat("b", 64),
		strings.Repeat("c", 253),
		strings.Repeat("d", 100) + "." + strings.Repeat("e", 100),
	} {
		t.Run(fmt.Sprintf("%d characters", len(name)), func(t *testing.T) {
			book := newBook(name, 1, "T", 1)
			desired := desiredConfigMap(book)
			for k, v := range desired.Labels {
				if errs := validation.IsQualifiedName(k); len(errs) != 0 {
					t.Errorf("label key %q: %v", k, errs)
				}
				if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
					t.Errorf("label %s value of %d characters: %v", k, len(v), errs)
				}
			}
			if desired.Labels[ManagedByLabel] != ManagedByValue {
				t.Errorf("labels %v lack %s", desired.Labels, ManagedBySelector)
			}
			_, hasBookLabel := desired.Labels[BookLabel]
			if want := len(name) <= validation.LabelValueMaxLength; hasBookLabel != want {
				t.Errorf("has the %s label: got %v, want %v", BookLabel, hasBookLabel, want)
			}

			f := newFixture(t, Options{}, book)
			f.mustSync(name)
			cm := f.mustGetConfigMap(name)
			if !metav1.IsControlledBy(cm, book) || cm.Data[TitleKey] != "T" {
				t.Errorf("ConfigMap is not the Book's: %+v", cm)
			}
			f.expectReady(name, metav1.ConditionTrue, ReasonConfigMapReady)

			// Converged: the next sync finds nothing to do.
			f.addConfigMapToLister(cm)
			f.feedBackBook(name)
			f.clearActions()
			f.mustSync(name)
			f.expectNoWrites()
		})
	}
}
