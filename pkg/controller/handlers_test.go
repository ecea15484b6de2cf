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
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// queuedKeys drains the keys ready in the controller's queue, in order.
func queuedKeys(c *Controller) []cache.ObjectName {
	var keys []cache.ObjectName
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		c.queue.Done(key)
		c.queue.Forget(key)
		keys = append(keys, key)
	}
	return keys
}

func expectQueued(t *testing.T, c *Controller, want ...cache.ObjectName) {
	t.Helper()
	got := queuedKeys(c)
	slices.SortFunc(got, compareNames)
	slices.SortFunc(want, compareNames)
	if !slices.Equal(got, want) {
		t.Errorf("queued keys: got %v, want %v", got, want)
	}
}

func compareNames(a, b cache.ObjectName) int {
	return strings.Compare(a.String(), b.String())
}

func withRV[T interface{ SetResourceVersion(string) }](obj T, rv string) T {
	obj.SetResourceVersion(rv)
	return obj
}

func TestBookHandlerAddAndDelete(t *testing.T) {
	f := newFixture(t, Options{})
	h := f.c.bookEventHandler()
	book := newBook("demo", 1, "T", 1)

	h.OnAdd(book, false)
	expectQueued(t, f.c, bookKey("demo"))

	h.OnDelete(book)
	expectQueued(t, f.c, bookKey("demo"))
}

func TestBookUpdateHandlerSkipsResync(t *testing.T) {
	f := newFixture(t, Options{})
	h := f.c.bookEventHandler()
	oldBook := withRV(newBook("demo", 1, "T", 1), "10")

	// A periodic resync hands the same object back.
	h.OnUpdate(oldBook, withRV(oldBook.DeepCopy(), "10"))
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("resync with the same resourceVersion enqueued %d keys, want 0", n)
	}

	// A real change, even a status-only one, has a new resourceVersion.
	newBook := withRV(oldBook.DeepCopy(), "11")
	newBook.Status.ConfigMapName = "demo"
	h.OnUpdate(oldBook, newBook)
	expectQueued(t, f.c, bookKey("demo"))
}

func TestBookDeleteHandlerTombstones(t *testing.T) {
	f := newFixture(t, Options{})
	h := f.c.bookEventHandler()

	book := newBook("demo", 1, "T", 1)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: book})
	expectQueued(t, f.c, bookKey("demo"))

	// Garbage must neither panic nor enqueue anything.
	for _, garbage := range []any{"not an object", 42, nil, &struct{}{}} {
		h.OnDelete(garbage)
		h.OnAdd(garbage, false)
	}
	expectQueued(t, f.c)
}

// TestConfigMapHandlerEnqueuesTheBookOfItsName: a Book's sync reads only
// the ConfigMap of its own name, so a ConfigMap event enqueues that Book,
// whatever the owner reference says; the sync judges the reference.
func TestConfigMapHandlerEnqueuesTheBookOfItsName(t *testing.T) {
	book := newBook("demo", 1, "T", 1)
	ref := func(mutate func(*metav1.OwnerReference)) []metav1.OwnerReference {
		r := bookControllerRef("demo", book.UID)
		if mutate != nil {
			mutate(&r)
		}
		return []metav1.OwnerReference{r}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
	}{
		{"controlled by the Book", ref(nil)},
		{"controlled by the Book through another version of the API", ref(func(r *metav1.OwnerReference) { r.APIVersion = "webapp.ydzs.io/v2" })},
		{"Book's name and kind, another UID (an earlier Book's)", ref(func(r *metav1.OwnerReference) { r.UID = "uid-earlier" })},
		{"owner but not controller", ref(func(r *metav1.OwnerReference) { r.Controller = nil })},
		{"a Book in another group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "library.example.com/v1" })},
		{"another kind with the same name", ref(func(r *metav1.OwnerReference) { r.Kind = "Deployment"; r.APIVersion = "apps/v1" })},
		{"a Book of another name", ref(func(r *metav1.OwnerReference) { r.Name = "other"; r.UID = "uid-other" })},
		{"no owner", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{}, book)
			h := f.c.projectingConfigMapHandler()
			cm := ownConfigMap(book)
			cm.OwnerReferences = tt.refs
			want := bookKey("demo")

			h.OnAdd(cm, false)
			expectQueued(t, f.c, want)

			h.OnUpdate(withRV(cm.DeepCopy(), "1"), withRV(cm.DeepCopy(), "2"))
			expectQueued(t, f.c, want)

			h.OnDelete(cm)
			expectQueued(t, f.c, want)

			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: cm})
			expectQueued(t, f.c, want)
		})
	}
}

func TestConfigMapUpdateHandler(t *testing.T) {
	a := newBook("a", 1, "A", 1)
	b := newBook("b", 1, "B", 1)

	t.Run("resync with the same resourceVersion", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		cm := withRV(ownConfigMap(a), "5")
		f.c.projectingConfigMapHandler().OnUpdate(cm, cm.DeepCopy())
		expectQueued(t, f.c)
	})
	t.Run("controller moves to another Book: only the Book of the name learns", func(t *testing.T) {
		// Book b's sync never reads ConfigMap a, so b has nothing to learn.
		f := newFixture(t, Options{}, a, b)
		oldCM := withRV(ownConfigMap(a), "5")
		newCM := withRV(oldCM.DeepCopy(), "6")
		newCM.OwnerReferences = []metav1.OwnerReference{bookControllerRef("b", b.UID)}
		f.c.projectingConfigMapHandler().OnUpdate(oldCM, newCM)
		expectQueued(t, f.c, bookKey("a"))
	})
	t.Run("controller reference removed", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		oldCM := withRV(ownConfigMap(a), "5")
		newCM := withRV(oldCM.DeepCopy(), "6")
		newCM.OwnerReferences = nil
		f.c.projectingConfigMapHandler().OnUpdate(oldCM, newCM)
		expectQueued(t, f.c, bookKey("a"))
	})
	t.Run("objects that are not ConfigMaps", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		f.c.projectingConfigMapHandler().OnUpdate("old", "new")
		f.c.projectingConfigMapHandler().OnUpdate(withRV(ownConfigMap(a), "1"), withRV(newBook("a", 1, "A", 1), "2"))
		expectQueued(t, f.c)
	})
}

func TestConfigMapDeleteHandlerTombstones(t *testing.T) {
	book := newBook("demo", 1, "T", 1)
	f := newFixture(t, Options{}, book)
	h := f.c.projectingConfigMapHandler()

	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: ownConfigMap(book)})
	expectQueued(t, f.c, bookKey("demo"))

	// Garbage, bare or in a tombstone, must neither panic nor enqueue.
	for _, garbage := range []any{
		"not an object",
		nil,
		book, // a Book is not a ConfigMap
		cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: "not an object"},
		cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: nil},
		cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: book},
	} {
		h.OnDelete(garbage)
		h.OnAdd(garbage, false)
	}
	expectQueued(t, f.c)
}

// TestConfigMapWithForgedControllerRef: a ConfigMap whose controller
// reference names the Book but carries another UID, an earlier Book's or a
// forged one, is not the Book's. Its events enqueue the Book all the same;
// the sync leaves it alone and reports that the garbage collector (which
// looks owners up by UID) has yet to delete it: no conflict, no Warning.
func TestConfigMapWithForgedControllerRef(t *testing.T) {
	book := newBook("demo", 1, "Mine", 1)
	cm := ownConfigMap(book)
	cm.OwnerReferences = []metav1.OwnerReference{bookControllerRef("demo", "uid-forged")}
	cm.Data = map[string]string{TitleKey: "forged", PriceKey: "0"}
	f := newFixture(t, Options{}, book, cm)

	f.c.projectingConfigMapHandler().OnAdd(cm, false)
	expectQueued(t, f.c, bookKey("demo"))

	before := f.mustGetConfigMap("demo")
	f.mustSync("demo")
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "")); n != 0 {
		t.Errorf("ConfigMap updates: got %d, want 0", n)
	}
	after := f.mustGetConfigMap("demo")
	if after.ResourceVersion != before.ResourceVersion || after.Data[TitleKey] != "forged" {
		t.Errorf("forged ConfigMap modified: %+v", after)
	}
	cond := f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapOfEarlierBook)
	if !strings.Contains(cond.Message, "uid-forged") || !strings.Contains(cond.Message, "garbage collector") {
		t.Errorf("Ready message %q does not name the UID and the garbage collector", cond.Message)
	}
	f.expectEvents()
}

func TestHandlersSkipTheEchoOfOurOwnWrites(t *testing.T) {
	f := newFixture(t, Options{})
	key := bookKey("demo")
	book := withRV(newBook("demo", 1, "T", 1), "10")
	f.tracker().wrote(key, book.UID, configMapsResource, "11")
	f.tracker().wrote(key, book.UID, booksResource, "12")

	// Our create and our status write come back: nothing to do.
	f.c.projectingConfigMapHandler().OnAdd(withRV(ownConfigMap(book), "11"), false)
	f.c.bookEventHandler().OnUpdate(book, withRV(book.DeepCopy(), "12"))
	expectQueued(t, f.c)

	// Whatever anybody changes after that is heard.
	f.c.bookEventHandler().OnUpdate(withRV(book.DeepCopy(), "12"), withRV(book.DeepCopy(), "13"))
	expectQueued(t, f.c, key)
	f.c.projectingConfigMapHandler().OnUpdate(withRV(ownConfigMap(book), "11"), withRV(ownConfigMap(book), "14"))
	expectQueued(t, f.c, key)
}

func TestOwnWriteThatPanicsLeavesNothingInFlight(t *testing.T) {
	f := newFixture(t, Options{})
	book := withRV(newBook("demo", 1, "T", 1), "10")
	func() {
		defer func() { _ = recover() }()
		_, _ = ownWrite(f.tracker(), book, booksResource, func() (*webappv2.Book, error) { panic("client bug") })
	}()
	// An event now is heard, not held back for a write that never ends.
	f.c.bookEventHandler().OnUpdate(book, withRV(book.DeepCopy(), "11"))
	expectQueued(t, f.c, bookKey("demo"))
}

// TestEventHeldBackDuringAWriteIsReleased: a change by somebody else that
// arrives while our write is in flight is held back, and once the write's
// answer shows it was not the echo, the Book is queued.
func TestEventHeldBackDuringAWriteIsReleased(t *testing.T) {
	f := newFixture(t, Options{})
	book := withRV(newBook("demo", 1, "T", 1), "10")
	_, err := ownWrite(f.tracker(), book, booksResource, func() (*webappv2.Book, error) {
		f.c.bookEventHandler().OnUpdate(book, withRV(book.DeepCopy(), "11")) // somebody's edit
		expectQueued(t, f.c)                                                 // held back
		return withRV(book.DeepCopy(), "12"), nil                            // our write landed after it
	})
	if err != nil {
		t.Fatal(err)
	}
	expectQueued(t, f.c, bookKey("demo"))
}
