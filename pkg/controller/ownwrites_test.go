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
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// newTestOwnWrites returns a tracker judged by two real informer stores,
// positioned with Bookmark as a watch would position them. The Books it
// releases to the queue are counted in released.
func newTestOwnWrites() (*ownWrites, cache.Store, cache.Store) {
	books := cache.NewStore(cache.MetaNamespaceKeyFunc)
	configMaps := cache.NewStore(cache.MetaNamespaceKeyFunc)
	return newOwnWrites(books, configMaps, func(cache.ObjectName) {}), books, configMaps
}

// releases makes w count the Books it releases to the queue.
func releases(w *ownWrites) *int {
	n := new(int)
	w.release = func(cache.ObjectName) { *n++ }
	return n
}

func expectCachesReady(t *testing.T, s *ownWrites, key cache.ObjectName) {
	t.Helper()
	if err := s.cacheBehind(key); err != nil {
		t.Fatalf("CacheBehind(%v): %v, want ready", key, err)
	}
}

func expectCachesStale(t *testing.T, s *ownWrites, key cache.ObjectName, resource resource, written, read string) {
	t.Helper()
	err := s.cacheBehind(key)
	var stale *staleCacheError
	if !errors.As(err, &stale) {
		t.Fatalf("CacheBehind(%v): %v, want a *staleCacheError", key, err)
	}
	want := staleCacheError{Resource: resource, Written: written, Read: read}
	if *stale != want {
		t.Errorf("CacheBehind(%v): %+v, want %+v", key, *stale, want)
	}
}

func TestOwnWritesWaitsUntilTheStoreReachesTheWrite(t *testing.T) {
	s, books, _ := newTestOwnWrites()
	key := bookKey("demo")
	books.Bookmark("5")

	expectCachesReady(t, s, key) // nothing written

	s.wrote(key, "uid-demo", booksResource, "10")
	expectCachesStale(t, s, key, booksResource, "10", "5")
	books.Bookmark("9")
	expectCachesStale(t, s, key, booksResource, "10", "9")

	// resourceVersions compare as numbers, not as strings.
	books.Bookmark("10")
	expectCachesReady(t, s, key)

	// Once ready, the record is gone: a store that went back (a test's
	// doing; a real store's resourceVersion only grows) does not matter.
	books.Bookmark("5")
	expectCachesReady(t, s, key)
}

func TestOwnWritesNeedsEveryResource(t *testing.T) {
	s, books, configMaps := newTestOwnWrites()
	key := bookKey("demo")
	books.Bookmark("100")
	configMaps.Bookmark("100")

	s.wrote(key, "uid-demo", configMapsResource, "101")
	s.wrote(key, "uid-demo", booksResource, "102")
	books.Bookmark("102")
	expectCachesStale(t, s, key, configMapsResource, "101", "100")

	configMaps.Bookmark("101")
	expectCachesReady(t, s, key)
}

func TestOwnWritesKeepsTheNewestWrite(t *testing.T) {
	s, books, _ := newTestOwnWrites()
	key := bookKey("demo")
	s.wrote(key, "uid-demo", booksResource, "20")
	s.wrote(key, "uid-demo", booksResource, "15") // older: ignored
	books.Bookmark("15")
	expectCachesStale(t, s, key, booksResource, "20", "15")
	s.wrote(key, "uid-demo", booksResource, "30")
	books.Bookmark("20")
	expectCachesStale(t, s, key, booksResource, "30", "20")
}

func TestOwnWritesKeysByBookAndUID(t *testing.T) {
	s, books, configMaps := newTestOwnWrites()
	demo, other := bookKey("demo"), bookKey("other")
	books.Bookmark("1")
	configMaps.Bookmark("1")

	s.wrote(demo, "uid-1", booksResource, "10")
	s.wrote(other, "uid-other", booksResource, "11")

	// A Book of the same name with another UID starts afresh: the earlier
	// Book's writes are dropped.
	s.wrote(demo, "uid-2", configMapsResource, "12")
	expectCachesStale(t, s, demo, configMapsResource, "12", "1")
	configMaps.Bookmark("12")
	expectCachesReady(t, s, demo)

	// Other Books' records are their own.
	expectCachesStale(t, s, other, booksResource, "11", "1")
	books.Bookmark("11")
	expectCachesReady(t, s, other)
}

// TestOwnWritesGoesAheadWhenItCannotTell: the guard only saves
// requests, so whatever cannot be compared must not hold a Book for ever.
func TestOwnWritesGoesAheadWhenItCannotTell(t *testing.T) {
	tests := []struct {
		name     string
		resource resource
		written  string
		read     string // "" leaves the store without a resourceVersion
		noStore  bool   // the tracker has no store for the resource
	}{
		{"store that cannot say (client-go's AtomicFIFO off, or never synced)", booksResource, "10", "", false},
		{"written resourceVersion that is not a number", booksResource, "abc", "5", false},
		{"store resourceVersion that is not a number", booksResource, "10", "abc", false},
		{"resource without a store", booksResource, "10", "5", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, books, _ := newTestOwnWrites()
			if tt.noStore {
				s.stores[tt.resource] = nil
			}
			if tt.read != "" {
				books.Bookmark(tt.read)
			}
			s.wrote(bookKey("demo"), "uid-demo", tt.resource, tt.written)
			expectCachesReady(t, s, bookKey("demo"))
		})
	}
}

// TestOwnWritesConcurrentUse is for the race detector: workers sync
// different Books at once.
func TestOwnWritesConcurrentUse(t *testing.T) {
	s, books, configMaps := newTestOwnWrites()
	var wg sync.WaitGroup
	for i := range 32 {
		key := bookKey(fmt.Sprintf("book-%d", i))
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		wg.Go(func() {
			for rv := 1; rv <= 100; rv++ {
				s.wrote(key, uid, configMapsResource, fmt.Sprint(rv))
				s.wrote(key, uid, booksResource, fmt.Sprint(rv))
				_ = s.cacheBehind(key)
			}
		})
	}
	for rv := 1; rv <= 100; rv++ {
		books.Bookmark(fmt.Sprint(rv))
		configMaps.Bookmark(fmt.Sprint(rv))
	}
	wg.Wait()
	for i := range 32 {
		expectCachesReady(t, s, bookKey(fmt.Sprintf("book-%d", i)))
	}
}

func TestEchoOfOwnWritesEndsTheRecord(t *testing.T) {
	s, _, _ := newTestOwnWrites()
	key := bookKey("demo")
	s.wrote(key, "uid-demo", configMapsResource, "101")
	s.wrote(key, "uid-demo", booksResource, "102")

	if s.isEcho(key, booksResource, "101") {
		t.Error("a Book event at the ConfigMap's resourceVersion counted as the echo of our status write")
	}
	if !s.isEcho(key, booksResource, "102") {
		t.Error("the Book event at our status write's resourceVersion is not taken for its echo")
	}
	if len(s.books) != 1 {
		t.Fatalf("record dropped while the ConfigMap's echo is still to come: %v", s.books)
	}
	if !s.isEcho(key, configMapsResource, "101") {
		t.Error("the ConfigMap event at our create's resourceVersion is not taken for its echo")
	}
	if len(s.books) != 0 {
		t.Errorf("records left after both echoes: %v", s.books)
	}
	// The same resourceVersion again (a relist replaying it) is no echo of
	// anything recorded any more.
	if s.isEcho(key, configMapsResource, "101") {
		t.Error("an event with no write recorded counted as an echo")
	}
}

func TestEchoAfterADeferredSyncRequeues(t *testing.T) {
	s, books, _ := newTestOwnWrites()
	key := bookKey("demo")
	books.Bookmark("5")
	s.wrote(key, "uid-demo", booksResource, "10")
	expectCachesStale(t, s, key, booksResource, "10", "5") // the sync is deferred

	if s.isEcho(key, booksResource, "10") {
		t.Error("the echo a deferred sync waits for was swallowed; the Book would never sync again")
	}
	if len(s.books) != 0 {
		t.Errorf("record left after its write was delivered: %v", s.books)
	}
}

func TestEventsDuringAWriteAreJudgedWhenItEnds(t *testing.T) {
	key := bookKey("demo")
	for _, tt := range []struct {
		name        string
		events      []string // resourceVersions of Book events heard while the write is in flight
		failed      bool     // the API server refused the write
		writtenAt   string
		wantRequeue bool
	}{
		{name: "nothing heard", writtenAt: "30"},
		{name: "the echo overtakes the response", events: []string{"30"}, writtenAt: "30"},
		{name: "another change was heard", events: []string{"29"}, writtenAt: "30", wantRequeue: true},
		{name: "the echo and a later change", events: []string{"30", "31"}, writtenAt: "30", wantRequeue: true},
		{name: "write refused, nothing heard", failed: true},
		{name: "write refused after a change was heard", events: []string{"29"}, failed: true, wantRequeue: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, books, _ := newTestOwnWrites()
			released := releases(s)
			s.begin(key, "uid-demo", booksResource)
			for _, rv := range tt.events {
				if !s.isEcho(key, booksResource, rv) {
					t.Errorf("event at %s during the write was not held back", rv)
				}
			}
			if tt.failed {
				s.failed(key, booksResource)
			} else {
				s.wrote(key, "uid-demo", booksResource, tt.writtenAt)
			}
			if requeued := *released == 1; requeued != tt.wantRequeue || *released > 1 {
				t.Errorf("Book released to the queue %d times, want requeue %v", *released, tt.wantRequeue)
			}
			// Nothing is held back once the write has ended.
			if s.isEcho(key, booksResource, "99") {
				t.Error("an event after the write ended was held back")
			}
			// Only a write whose echo has not been heard is waited for.
			books.Bookmark("1")
			err := s.cacheBehind(key)
			echoHeard := len(tt.events) == 1 && tt.events[0] == tt.writtenAt
			if waits := err != nil; waits != (!tt.failed && !echoHeard) {
				t.Errorf("CacheBehind = %v with the store behind", err)
			}
		})
	}
}
