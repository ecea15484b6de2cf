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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// The cache-lag tests: the fake clients give every write a new
// resourceVersion (fixture_test.go), and each test feeds the watch events
// into the caches by hand, in the order under test.

// newVersionedFixture holds one Book "demo" at resourceVersion 1.
func newVersionedFixture(t *testing.T) *fixture {
	return newFixture(t, Options{}, newBook("demo", 1, "Title", 1))
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
	changed.Generation, changed.Spec.Price = 2, webappv2.WholePrice(2)
	if _, err := f.bookClient.WebappV2().Books(testNamespace).Update(t.Context(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.feedBackBook("demo")
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

	// The add event: the cache has reached our create, and a sync is a
	// plain no-op that leaves nothing awaited.
	f.feedBackConfigMap("demo")
	f.clearActions()
	f.mustSync("demo")
	f.expectNoWrites()
	if err := f.c.ownWrites.cacheBehind(bookKey("demo")); err != nil {
		t.Fatalf("the ConfigMap's add event did not end the wait: %v", err)
	}

	// Deleting the ConfigMap now is repaired at once: nothing is awaited.
	if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.feedBackConfigMap("demo")
	f.mustSync("demo")
	f.expectConfigMapMatches(f.getBook("demo"))
}

// TestOwnConfigMapDeletedUnseenIsRecreated: if the ConfigMap we created is
// deleted before the informer ever shows it, and a relist skips both
// events, the wait must not hide its absence for ever. No event comes for
// the Book, so it is looked at again after cacheLagRecheck; by then the
// relist has moved the cache past our create, and the sync recreates it.
func TestOwnConfigMapDeletedUnseenIsRecreated(t *testing.T) {
	f := newVersionedFixture(t)

	f.mustSync("demo")
	f.feedBackBook("demo")
	if err := f.kubeClient.CoreV1().ConfigMaps(testNamespace).Delete(t.Context(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	res, err := f.syncResult("demo")
	if err != nil {
		t.Fatalf("syncHandler: %v", err)
	}
	if cm := f.getConfigMap("demo"); cm != nil {
		t.Fatal("ConfigMap recreated while its create was still awaited")
	}
	if res.RequeueAfter != f.c.cacheLagRecheck {
		t.Errorf("Result %+v, want RequeueAfter %v: no event will wake the Book", res, f.c.cacheLagRecheck)
	}

	// The relist: an empty list at the current resourceVersion.
	if err := f.configMapIndexer().Replace(nil, f.versions.current()); err != nil {
		t.Fatal(err)
	}
	f.mustSync("demo")
	f.expectConfigMapMatches(f.getBook("demo"))
}
