package manager

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// cacheSizeAge is how long a counted cache size is reported before the
// cache is counted again.
const cacheSizeAge = time.Second

// cacheSize is the number of objects in an informer's store, for the
// book_controller_cached_* gauges. Counting walks the store's keys, and a
// scrape that listed the Book cache instead cost 25 ms of CPU with 100,000
// Books, most of it collecting the list's garbage. Prometheus scrapes every
// 15 to 60 seconds, but the bench reads /metrics twenty times a second, so
// a count is reused for cacheSizeAge.
type cacheSize struct {
	store cache.Store
	clock clock.PassiveClock

	mu      sync.Mutex
	counted time.Time
	n       int
}

func newCacheSize(store cache.Store, c clock.PassiveClock) *cacheSize {
	return &cacheSize{store: store, clock: c}
}

// Len is the store's size as of at most cacheSizeAge ago.
func (s *cacheSize) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.clock.Now(); s.counted.IsZero() || now.Sub(s.counted) >= cacheSizeAge {
		s.n, s.counted = len(s.store.ListKeys()), now
	}
	return s.n
}
