package controller

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// bumpResourceVersionOnStatusWrites makes the fake Book client behave like
// the API server: every status write gets a new resourceVersion.
func bumpResourceVersionOnStatusWrites(f *fixture) {
	rv := 100
	f.bookClient.PrependReactor("update", "books", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		rv++
		book := a.(core.UpdateAction).GetObject().(*webappv1.Book).DeepCopy()
		book.ResourceVersion = strconv.Itoa(rv)
		gvr := webappv1.SchemeGroupVersion.WithResource("books")
		if err := f.bookClient.Tracker().Update(gvr, book, book.Namespace); err != nil {
			return true, nil, err
		}
		return true, book, nil
	})
}

// newVersionedFixture holds one Book "demo" at resourceVersion 1, whose
// status writes get new resourceVersions as on a real API server: what the
// cache-lag tests need to tell a stale copy from a current one.
func newVersionedFixture(t *testing.T) *fixture {
	book := newBook("demo", 1, "Title", 1)
	book.ResourceVersion = "1"
	f := newFixture(t, Options{}, book)
	bumpResourceVersionOnStatusWrites(f)
	return f
}

// TestSyncWaitsForCacheToCatchUpWithOwnStatusWrite: right after our status
// write the cache still holds the Book it was computed from. A sync then
// (the ConfigMap's add event usually comes first) must not act on that stale
// copy, which would only earn a 409; once the cache shows the written
// version, syncs proceed, and a real change is acted on.
func TestSyncWaitsForCacheToCatchUpWithOwnStatusWrite(t *testing.T) {
	f := newVersionedFixture(t)

	f.mustSync("demo")
	if n := len(f.statusWrites()); n != 1 {
		t.Fatalf("status writes after the first sync: got %d, want 1", n)
	}

	// The ConfigMap's event arrives before the Book's: the cache has the
	// ConfigMap but still the old Book.
	f.feedBackConfigMap("demo")
	f.clearActions()
	f.mustSync("demo")
	f.expectNoWrites()

	// The Book's event arrives: the cache is current and converged.
	f.feedBackBook("demo")
	f.clearActions()
	f.mustSync("demo")
	f.expectNoWrites()

	// A spec change after that is acted on as usual.
	changed := f.getBook("demo")
	changed.Generation, changed.Spec.Price, changed.ResourceVersion = 2, 2, "200"
	f.addBookToLister(changed)
	f.clearActions()
	f.mustSync("demo")
	if got := f.mustGetConfigMap("demo").Data[PriceKey]; got != "2" {
		t.Errorf("ConfigMap price after a spec change: got %q, want 2", got)
	}
	if n := len(f.statusWrites()); n != 1 {
		t.Errorf("status writes after a spec change: got %d, want 1", n)
	}
}

// TestSyncWaitsForCacheToShowOwnConfigMap: the event of our status write can
// overtake the ConfigMap's add event. A sync in between sees a Ready Book and
// no ConfigMap in the cache; it must not create the ConfigMap again (409,
// then a GET). Once the informer delivers the ConfigMap, syncs act on the
// cache as usual.
func TestSyncWaitsForCacheToShowOwnConfigMap(t *testing.T) {
	f := newVersionedFixture(t)

	f.mustSync("demo")
	f.feedBackBook("demo") // the Book's event first; no ConfigMap in the cache yet
	f.clearActions()
	f.mustSync("demo")
	if a := append(f.kubeClient.Actions(), f.bookClient.Actions()...); len(a) != 0 {
		t.Fatalf("a sync before the ConfigMap reached the cache made requests: %s", describeActions(a))
	}

	// The add event: the expectation is met, and a sync is a plain no-op.
	f.feedBackConfigMap("demo")
	f.c.configMapEventHandler().OnAdd(f.mustGetConfigMap("demo"), false)
	if _, pending := f.c.configMapsCreated.Load(cache.ObjectName{Namespace: testNamespace, Name: "demo"}); pending {
		t.Fatal("the ConfigMap's add event did not clear the expectation")
	}
	f.clearActions()
	f.mustSync("demo")
	f.expectNoWrites()

	// Deleting the ConfigMap now is repaired at once: nothing is awaited.
	if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.feedBackConfigMap("demo")
	f.mustSync("demo")
	f.expectConfigMapMatches(f.getBook("demo"))
}

// TestOwnConfigMapExpectationTimesOut: if the ConfigMap we created is deleted
// before the informer ever shows it (and a relist skips both events), the
// expectation must not hide its absence for ever.
func TestOwnConfigMapExpectationTimesOut(t *testing.T) {
	f := newVersionedFixture(t)

	f.mustSync("demo")
	f.feedBackBook("demo")
	if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	f.clock.Step(CreateObservedTimeout - time.Second)
	f.mustSync("demo")
	if cm := f.getConfigMap("demo"); cm != nil {
		t.Fatal("ConfigMap recreated while its create was still awaited")
	}

	f.clock.Step(2 * time.Second)
	f.mustSync("demo")
	f.expectConfigMapMatches(f.getBook("demo"))
}
