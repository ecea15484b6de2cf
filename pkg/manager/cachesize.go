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
