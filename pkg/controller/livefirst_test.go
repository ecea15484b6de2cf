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
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"ydzs.io/book-controller/internal/poll"
)

func backfillKeys(n int) []cache.ObjectName {
	keys := make([]cache.ObjectName, n)
	for i := range keys {
		keys[i] = bookKey(fmt.Sprintf("listed-%03d", i))
	}
	return keys
}

// get takes the next key from the controller's queue and marks it done.
func get(t *testing.T, c *Controller) cache.ObjectName {
	t.Helper()
	key, shutdown := c.queue.Get()
	if shutdown {
		t.Fatal("queue shut down")
	}
	c.queue.Done(key)
	return key
}

// enqueueListed queues key as the handlers do for an object of an
// informer's initial list with nothing new to answer.
func enqueueListed(c *Controller, key cache.ObjectName) {
	c.enqueue(HandlerEvent{Key: key, InitialList: true}, nil)
}

// enqueueLive queues key as the handlers do for a live change.
func enqueueLive(c *Controller, key cache.ObjectName) { c.enqueue(HandlerEvent{Key: key}, nil) }

// TestLiveChangesOvertakeTheInitialList: keys of the informers' initial
// list wait behind every live change, in their own order; a listed key that
// a live change touches moves to the live line.
func TestLiveChangesOvertakeTheInitialList(t *testing.T) {
	f := newFixture(t, Options{})
	listed := backfillKeys(100)
	for _, k := range listed {
		enqueueListed(f.c, k)
	}
	enqueueLive(f.c, bookKey("new"))
	enqueueLive(f.c, listed[50]) // edited while it waits as backfill
	enqueueListed(f.c, listed[10])
	if n := f.c.queue.Len(); n != 101 {
		t.Fatalf("queue length: got %d, want 101 (each key once)", n)
	}

	if k := get(t, f.c); k != bookKey("new") {
		t.Fatalf("first key: got %v, want the live change", k)
	}
	if k := get(t, f.c); k != listed[50] {
		t.Fatalf("second key: got %v, want the listed key a live change touched", k)
	}
	for i, want := range listed {
		if i == 50 {
			continue
		}
		if k := get(t, f.c); k != want {
			t.Fatalf("backfill out of order: got %v, want %v", k, want)
		}
	}
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("queue length at the end: got %d, want 0", n)
	}
}

// TestLiveFirstKeepsTheQueueGuarantees: a key added while a worker has it
// is handed out again once the worker is done (not twice at once), and
// a retry counts as live.
func TestLiveFirstKeepsTheQueueGuarantees(t *testing.T) {
	f := newFixture(t, Options{RateLimiter: fastRateLimiter()})
	listed := backfillKeys(3)
	for _, k := range listed {
		enqueueListed(f.c, k)
	}
	key, _ := f.c.queue.Get()
	enqueueListed(f.c, key) // its own initial-list event, while it is synced
	if n := f.c.queue.Len(); n != 2 {
		t.Errorf("queue length while the key is processed: got %d, want 2", n)
	}
	f.c.queue.Done(key)
	if n := f.c.queue.Len(); n != 3 {
		t.Errorf("queue length after Done: got %d, want 3 (the key back in line)", n)
	}
	for range 3 {
		get(t, f.c)
	}

	for _, k := range listed {
		enqueueListed(f.c, k)
	}
	f.c.queue.AddRateLimited(bookKey("failed"))
	// The retry arrives through the delaying queue after its backoff.
	poll.Eventually(t, "the retry", pollInterval, pollTimeout, queueLength(f.c.queue, 4))
	if k := get(t, f.c); k != bookKey("failed") {
		t.Errorf("first key: got %v, want the retry ahead of the backfill", k)
	}
}

// TestFIFOQueueKeepsArrivalOrder: with the layer off, the initial list
// comes first, as in client-go's default queue.
func TestFIFOQueueKeepsArrivalOrder(t *testing.T) {
	f := newFixture(t, Options{Off: Layers{LiveFirst: true}})
	listed := backfillKeys(3)
	for _, k := range listed {
		enqueueListed(f.c, k)
	}
	enqueueLive(f.c, bookKey("new"))
	if k := get(t, f.c); k != listed[0] {
		t.Errorf("first key: got %v, want %v (arrival order)", k, listed[0])
	}
}

// TestHandlersTellInitialListFromLiveChanges: through the informers'
// handlers, an edit of a listed Book overtakes the rest of the list.
func TestHandlersTellInitialListFromLiveChanges(t *testing.T) {
	f := newFixture(t, Options{})
	h := f.c.bookEventHandler()
	for i := range 5 {
		h.OnAdd(withReadyStatus(newBook(fmt.Sprintf("listed-%03d", i), 1, "T", 1), time.Now()), true)
	}
	old := withReadyStatus(newBook("listed-003", 1, "T", 1), time.Now())
	edited := newBook("listed-003", 2, "Edited", 1)
	edited.ResourceVersion = "2"
	h.OnUpdate(old, edited)
	if k := get(t, f.c); k != bookKey("listed-003") {
		t.Errorf("first key: got %v, want the edited Book", k)
	}
	if k := get(t, f.c); k != bookKey("listed-000") {
		t.Errorf("second key: got %v, want the first listed Book", k)
	}
}

// TestListedBookWithAnUnansweredSpecIsLive: a Book the initial list brings
// whose spec no sync has answered (created, or edited, while no controller
// ran) is a live change and overtakes the converged Books listed before
// it; a listed ConfigMap waits as backfill.
func TestListedBookWithAnUnansweredSpecIsLive(t *testing.T) {
	f := newFixture(t, Options{})
	h := f.c.bookEventHandler()
	for i := range 3 {
		h.OnAdd(withReadyStatus(newBook(fmt.Sprintf("listed-%03d", i), 1, "T", 1), time.Now()), true)
	}
	drifted := f.c.cachedForm(ownConfigMap(newBook("drifted", 1, "T", 1)))
	f.c.configMapEventHandler().OnAdd(drifted, true)
	edited := withReadyStatus(newBook("edited", 1, "T", 1), time.Now())
	edited.Generation = 2
	h.OnAdd(edited, true)
	h.OnAdd(newBook("created", 1, "T", 1), true)

	want := []cache.ObjectName{bookKey("edited"), bookKey("created"),
		bookKey("listed-000"), bookKey("listed-001"), bookKey("listed-002"), bookKey("drifted")}
	for i, w := range want {
		if k := get(t, f.c); k != w {
			t.Fatalf("key %d: got %v, want %v", i, k, w)
		}
	}
}
