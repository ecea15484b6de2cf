package controller

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// newTestConsistencyStore returns a store judged by two real informer
// stores, positioned with Bookmark as a watch would position them.
func newTestConsistencyStore() (*consistencyStore, cache.Store, cache.Store) {
	books := cache.NewStore(cache.MetaNamespaceKeyFunc)
	configMaps := cache.NewStore(cache.MetaNamespaceKeyFunc)
	return newConsistencyStore(map[schema.GroupResource]storeVersion{
		booksResource:      books,
		configMapsResource: configMaps,
	}), books, configMaps
}

func expectCachesReady(t *testing.T, s *consistencyStore, key cache.ObjectName) {
	t.Helper()
	if err := s.EnsureReady(key); err != nil {
		t.Fatalf("EnsureReady(%v): %v, want ready", key, err)
	}
}

func expectCachesStale(t *testing.T, s *consistencyStore, key cache.ObjectName, resource schema.GroupResource, written, read string) {
	t.Helper()
	err := s.EnsureReady(key)
	var stale *staleCacheError
	if !errors.As(err, &stale) {
		t.Fatalf("EnsureReady(%v): %v, want a *staleCacheError", key, err)
	}
	want := staleCacheError{Resource: resource, Written: written, Read: read}
	if *stale != want {
		t.Errorf("EnsureReady(%v): %+v, want %+v", key, *stale, want)
	}
}

func TestConsistencyStoreWaitsUntilTheStoreReachesTheWrite(t *testing.T) {
	s, books, _ := newTestConsistencyStore()
	key := bookKey("demo")
	books.Bookmark("5")

	expectCachesReady(t, s, key) // nothing written

	s.WroteAt(key, "uid-demo", booksResource, "10")
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

func TestConsistencyStoreNeedsEveryResource(t *testing.T) {
	s, books, configMaps := newTestConsistencyStore()
	key := bookKey("demo")
	books.Bookmark("100")
	configMaps.Bookmark("100")

	s.WroteAt(key, "uid-demo", configMapsResource, "101")
	s.WroteAt(key, "uid-demo", booksResource, "102")
	books.Bookmark("102")
	expectCachesStale(t, s, key, configMapsResource, "101", "100")

	configMaps.Bookmark("101")
	expectCachesReady(t, s, key)
}

func TestConsistencyStoreKeepsTheNewestWrite(t *testing.T) {
	s, books, _ := newTestConsistencyStore()
	key := bookKey("demo")
	s.WroteAt(key, "uid-demo", booksResource, "20")
	s.WroteAt(key, "uid-demo", booksResource, "15") // older: ignored
	books.Bookmark("15")
	expectCachesStale(t, s, key, booksResource, "20", "15")
	s.WroteAt(key, "uid-demo", booksResource, "30")
	books.Bookmark("20")
	expectCachesStale(t, s, key, booksResource, "30", "20")
}

func TestConsistencyStoreKeysByBookAndUID(t *testing.T) {
	s, books, configMaps := newTestConsistencyStore()
	demo, other := bookKey("demo"), bookKey("other")
	books.Bookmark("1")
	configMaps.Bookmark("1")

	s.WroteAt(demo, "uid-1", booksResource, "10")
	s.WroteAt(other, "uid-other", booksResource, "11")

	// A Book of the same name with another UID starts afresh: the earlier
	// Book's writes are dropped.
	s.WroteAt(demo, "uid-2", configMapsResource, "12")
	expectCachesStale(t, s, demo, configMapsResource, "12", "1")
	configMaps.Bookmark("12")
	expectCachesReady(t, s, demo)

	// Clear with another UID keeps the record; with its UID or "" drops it.
	expectCachesStale(t, s, other, booksResource, "11", "1")
	s.Clear(other, "uid-not-this")
	expectCachesStale(t, s, other, booksResource, "11", "1")
	s.Clear(other, "uid-other")
	expectCachesReady(t, s, other)

	s.WroteAt(other, "uid-other", booksResource, "13")
	s.Clear(other, "")
	expectCachesReady(t, s, other)
}

// TestConsistencyStoreGoesAheadWhenItCannotTell: the guard only saves
// requests, so whatever cannot be compared must not hold a Book for ever.
func TestConsistencyStoreGoesAheadWhenItCannotTell(t *testing.T) {
	tests := []struct {
		name     string
		resource schema.GroupResource
		written  string
		read     string // "" leaves the store without a resourceVersion
	}{
		{"store that cannot say (client-go's AtomicFIFO off, or never synced)", booksResource, "10", ""},
		{"written resourceVersion that is not a number", booksResource, "abc", "5"},
		{"store resourceVersion that is not a number", booksResource, "10", "abc"},
		{"resource without a store", schema.GroupResource{Resource: "secrets"}, "10", "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, books, _ := newTestConsistencyStore()
			if tt.read != "" {
				books.Bookmark(tt.read)
			}
			s.WroteAt(bookKey("demo"), "uid-demo", tt.resource, tt.written)
			expectCachesReady(t, s, bookKey("demo"))
		})
	}
}

// TestConsistencyStoreConcurrentUse is for the race detector: workers sync
// different Books at once.
func TestConsistencyStoreConcurrentUse(t *testing.T) {
	s, books, configMaps := newTestConsistencyStore()
	var wg sync.WaitGroup
	for i := range 32 {
		key := bookKey(fmt.Sprintf("book-%d", i))
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		wg.Go(func() {
			for rv := 1; rv <= 100; rv++ {
				s.WroteAt(key, uid, configMapsResource, fmt.Sprint(rv))
				s.WroteAt(key, uid, booksResource, fmt.Sprint(rv))
				_ = s.EnsureReady(key)
			}
			s.Clear(key, uid)
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
