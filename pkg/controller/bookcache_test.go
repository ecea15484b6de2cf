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
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// sameString reports whether a and b share their bytes: one allocation.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// decodedBook is a converged Book whose every string is an allocation of its
// own, as a decoder leaves them.
func decodedBook(name string) *webappv2.Book {
	b := newBook(name, 1, "T", 1)
	b.Namespace = strings.Clone(testNamespace)
	b.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	b.Status.ConfigMapName = strings.Clone(name)
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: strings.Clone(ConditionReady), Status: metav1.ConditionStatus(strings.Clone("True")),
		Reason: strings.Clone(ReasonConfigMapReady), Message: "ConfigMap " + name + " holds the current spec",
		LastTransitionTime: metav1.NewTime(t0),
	})
	return b
}

func TestBookTransformSharesRepeatedStrings(t *testing.T) {
	transform := newBookCompactor().transform
	var books []*webappv2.Book
	for _, name := range []string{"a", "b"} {
		want := decodedBook(name)
		obj, err := transform(decodedBook(name))
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*webappv2.Book)
		want.ManagedFields = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("transform changed what the Book says:\ngot  %+v\nwant %+v", got, want)
		}
		books = append(books, got)
	}
	a, b := books[0], books[1]
	if !sameString(a.Namespace, b.Namespace) {
		t.Error("two Books of one namespace keep a namespace string each")
	}
	if !sameString(a.Status.ConfigMapName, a.Name) {
		t.Error("status.configMapName is a copy of the name")
	}
	c := a.Status.Conditions[0]
	for _, s := range [][2]string{{c.Type, ConditionReady}, {string(c.Status), string(metav1.ConditionTrue)}, {c.Reason, ReasonConfigMapReady}} {
		if !sameString(s[0], s[1]) {
			t.Errorf("condition string %q is a copy of the constant", s[0])
		}
	}
	// A tombstone passes unchanged.
	if obj, err := transform("tombstone"); err != nil || obj != "tombstone" {
		t.Errorf("transform(tombstone) = %v, %v", obj, err)
	}
}

func TestConfigMapProjectionSharesTheCachedBooksStrings(t *testing.T) {
	f := newFixture(t, Options{})
	book := decodedBook("demo")
	f.addBookToLister(book)
	cm := ownConfigMap(book)
	// Every string decoded apart, as from the wire.
	cm.Namespace, cm.Name = strings.Clone(cm.Namespace), strings.Clone(cm.Name)
	cm.Labels[BookLabel] = strings.Clone(cm.Labels[BookLabel])
	cm.Data[TitleKey] = strings.Clone(cm.Data[TitleKey])
	ref := &cm.OwnerReferences[0]
	ref.Name, ref.UID = strings.Clone(ref.Name), types.UID(strings.Clone(string(ref.UID)))
	v := f.c.cachedForm(cm).(*cachedConfigMap)
	if !reflect.DeepEqual(v, projectConfigMap(ownConfigMap(book))) {
		t.Errorf("projection differs from projectConfigMap's: %+v", v)
	}
	for _, s := range [][2]string{{v.namespace, book.Namespace}, {v.name, book.Name}, {v.book, book.Name},
		{v.controller.name, book.Name}, {string(v.controller.uid), string(book.UID)}, {v.title, book.Spec.Title}} {
		if !sameString(s[0], s[1]) {
			t.Errorf("projection keeps a copy of the Book's %q", s[0])
		}
	}
}
