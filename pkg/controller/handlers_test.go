package controller

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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

func TestConfigMapHandlerEnqueuesOnlyTheControllingBook(t *testing.T) {
	book := newBook("demo", 1, "T", 1)
	ref := func(mutate func(*metav1.OwnerReference)) []metav1.OwnerReference {
		r := bookControllerRef("demo", book.UID)
		if mutate != nil {
			mutate(&r)
		}
		return []metav1.OwnerReference{r}
	}
	tests := []struct {
		name    string
		refs    []metav1.OwnerReference
		enqueue bool
	}{
		{"controlled by the Book", ref(nil), true},
		{"controlled by the Book through another version of the API", ref(func(r *metav1.OwnerReference) { r.APIVersion = "webapp.ydzs.io/v2" }), true},
		{"Book's name and kind, another UID", ref(func(r *metav1.OwnerReference) { r.UID = "uid-forged" }), false},
		{"owner but not controller", ref(func(r *metav1.OwnerReference) { r.Controller = nil }), false},
		{"a Book in another group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "library.example.com/v1" }), false},
		{"a Book with an unparsable apiVersion", ref(func(r *metav1.OwnerReference) { r.APIVersion = "a/b/c" }), false},
		{"another kind with the same name", ref(func(r *metav1.OwnerReference) { r.Kind = "Deployment"; r.APIVersion = "apps/v1" }), false},
		{"a Book that does not exist", ref(func(r *metav1.OwnerReference) { r.Name = "ghost"; r.UID = "uid-ghost" }), false},
		{"no owner", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{}, book)
			h := f.c.configMapEventHandler()
			cm := ownConfigMap(book)
			cm.OwnerReferences = tt.refs
			var want []cache.ObjectName
			if tt.enqueue {
				want = []cache.ObjectName{bookKey("demo")}
			}

			f.c.enqueueControllingBook(cm)
			expectQueued(t, f.c, want...)

			h.OnAdd(cm, false)
			expectQueued(t, f.c, want...)

			h.OnUpdate(withRV(cm.DeepCopy(), "1"), withRV(cm.DeepCopy(), "2"))
			expectQueued(t, f.c, want...)

			h.OnDelete(cm)
			expectQueued(t, f.c, want...)

			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/demo", Obj: cm})
			expectQueued(t, f.c, want...)
		})
	}
}

func TestConfigMapUpdateHandler(t *testing.T) {
	a := newBook("a", 1, "A", 1)
	b := newBook("b", 1, "B", 1)

	t.Run("resync with the same resourceVersion", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		cm := withRV(ownConfigMap(a), "5")
		f.c.configMapEventHandler().OnUpdate(cm, cm.DeepCopy())
		expectQueued(t, f.c)
	})
	t.Run("controller moves to another Book: both learn", func(t *testing.T) {
		f := newFixture(t, Options{}, a, b)
		oldCM := withRV(ownConfigMap(a), "5")
		newCM := withRV(oldCM.DeepCopy(), "6")
		newCM.OwnerReferences = []metav1.OwnerReference{bookControllerRef("b", b.UID)}
		f.c.configMapEventHandler().OnUpdate(oldCM, newCM)
		expectQueued(t, f.c, bookKey("a"), bookKey("b"))
	})
	t.Run("controller reference removed: the old owner learns", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		oldCM := withRV(ownConfigMap(a), "5")
		newCM := withRV(oldCM.DeepCopy(), "6")
		newCM.OwnerReferences = nil
		f.c.configMapEventHandler().OnUpdate(oldCM, newCM)
		expectQueued(t, f.c, bookKey("a"))
	})
	t.Run("objects that are not ConfigMaps", func(t *testing.T) {
		f := newFixture(t, Options{}, a)
		f.c.configMapEventHandler().OnUpdate("old", "new")
		f.c.configMapEventHandler().OnUpdate(withRV(ownConfigMap(a), "1"), withRV(newBook("a", 1, "A", 1), "2"))
		expectQueued(t, f.c)
	})
}

func TestConfigMapDeleteHandlerTombstones(t *testing.T) {
	book := newBook("demo", 1, "T", 1)
	f := newFixture(t, Options{}, book)
	h := f.c.configMapEventHandler()

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

// TestConfigMapWithForgedControllerRef checks both halves of the defence
// against a ConfigMap whose controller reference names the Book but carries
// another UID: the handler does not enqueue, and the sync, run anyway by the
// Book's own events, treats it as a conflict and leaves it alone.
func TestConfigMapWithForgedControllerRef(t *testing.T) {
	book := newBook("demo", 1, "Mine", 1)
	cm := ownConfigMap(book)
	cm.OwnerReferences = []metav1.OwnerReference{bookControllerRef("demo", "uid-forged")}
	cm.Data = map[string]string{TitleKey: "forged", PriceKey: "0"}
	f := newFixture(t, Options{}, book, cm)

	f.c.configMapEventHandler().OnAdd(cm, false)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queue length after the forged ConfigMap's add event: got %d, want 0", n)
	}

	before := f.mustGetConfigMap("demo")
	f.mustSync("demo")
	if n := len(filterActions(f.kubeClient.Actions(), "update", "configmaps", "")); n != 0 {
		t.Errorf("ConfigMap updates: got %d, want 0", n)
	}
	after := f.mustGetConfigMap("demo")
	if after.ResourceVersion != before.ResourceVersion || after.Data[TitleKey] != "forged" {
		t.Errorf("forged ConfigMap modified: %+v", after)
	}
	f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapConflict)
	f.expectEvents(eventConflict)
}
