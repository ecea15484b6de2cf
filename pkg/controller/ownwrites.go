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
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// ownWrites is an optimization layer (Options.Off.OwnWrites turns it off);
// the classic loop works without it, only with more requests. It remembers,
// per Book, the resourceVersion of our last write of each resource until
// the informers deliver it back, and buys two things:
//
//   - No sync on a cache older than our own write (cacheBehind). Without it a
//     sync right after our status write computes the status again from the
//     Book it started from and earns a 409; one right after our ConfigMap
//     create (the two informers' watches race) creates it again, is told
//     AlreadyExists and reads it back. kube-controller-manager's ReplicaSet
//     controller guards the same way since v1.36
//     (k8s.io/kubernetes pkg/controller/util/consistency): a sync goes ahead
//     once each informer's store has applied the watch up to what we wrote
//     (client-go's LastStoreSyncResourceVersion). resourceVersions of one
//     resource are ordered, so this needs no clock.
//   - No sync for the echo of our own write (isEcho): the watch event that
//     carries exactly the resourceVersion our write left queues nothing,
//     because the sync that wrote it already judged that very object. Each
//     new Book is synced once instead of twice: 20 queue adds for 20 new
//     Books instead of 45, counted by
//     `go test ./test/integration/binary -run TestOwnWritesDoNotComeBackAsWork`.
//     A record costs about 240 bytes while it lives
//     (`go test ./pkg/controller -run '^$' -bench BacklogBytes -benchtime 3x`).
//
// Together, on a 300-Book burst whose ConfigMap watch lags 300 ms: 300
// ConfigMap creates, 300 status writes and no ConfigMap read with the
// layer; 346, 312 and 46 without it (2026-12-04, `go test
// ./test/integration/controller -run
// TestBurstMakesOneCreateAndOneStatusWritePerBook -v` logs both).
//
// The echo can overtake the write's response (27 % of Book echoes and 25 %
// of ConfigMap echoes did on a 10,000-Book backlog), so an event heard while
// a write of its resource is in flight is held back, and released to the
// queue when the write's answer shows it was not the echo.
//
// Whatever cannot be compared (a store that cannot say, a resourceVersion
// that is not a number) counts as reached: the layer only saves requests,
// and the API server's conflict checks keep the controller correct.
type ownWrites struct {
	// stores are the informers' stores, by resource; set once by
	// newOwnWrites. A nil store turns tracking of its resource off.
	stores [numResources]storeVersion
	// release is the event handlers' enqueue, for an event held back during
	// a write that proves not to be its echo. Called by the worker that made
	// the write, outside mu.
	release func(cache.ObjectName)

	// mu guards books. Writers: the workers (begin, wrote, failed,
	// cacheBehind); readers and writers: the informers' handler goroutines
	// (isEcho).
	mu    sync.Mutex
	books map[cache.ObjectName]bookWrites
}

// resource is a resource the controller writes.
type resource int

const (
	booksResource      resource = iota // a Book's status
	configMapsResource                 // a Book's ConfigMap
	numResources
)

func (r resource) String() string {
	if r == booksResource {
		return "books.webapp.ydzs.io"
	}
	return "configmaps"
}

// storeVersion is what an informer's store tells of its progress: the
// resourceVersion of the last list or watch event applied, or "" when
// client-go cannot say (its AtomicFIFO feature turned off).
type storeVersion interface {
	LastStoreSyncResourceVersion() string
}

// bookWrites are our writes for one Book, identified by its UID so that a
// later Book of the same name starts afresh.
type bookWrites struct {
	uid    types.UID
	writes [numResources]write
	// deferred is set when a sync found the caches behind these writes and
	// left the Book to the event that brings them: that event must then
	// queue the Book, echo or not.
	deferred bool
}

// write is what is known of our writes of one resource for one Book.
type write struct {
	// rv is the newest resourceVersion written, "" once the informer has
	// delivered it (or when none was made).
	rv string
	// inFlight is set from begin until wrote or failed. heard is the
	// resourceVersion of the first event heard meanwhile, heardMore whether
	// another one came.
	inFlight  bool
	heardMore bool
	heard     string
}

// pending tells whether anything is left to wait for.
func (b bookWrites) pending() bool {
	for _, w := range b.writes {
		if w.rv != "" || w.inFlight {
			return true
		}
	}
	return false
}

// newOwnWrites tracks writes of Books and ConfigMaps against the informer
// stores given; release queues a Book whose held-back event was not an echo.
func newOwnWrites(books, configMaps storeVersion, release func(cache.ObjectName)) *ownWrites {
	return &ownWrites{
		stores:  [numResources]storeVersion{booksResource: books, configMapsResource: configMaps},
		release: release,
		books:   map[cache.ObjectName]bookWrites{},
	}
}

// ownWrite sends one of our writes of resource r for book through the
// tracker: events of r for the Book are held back while it is in flight, and
// its resourceVersion is remembered once the API server took it.
func ownWrite[T interface{ GetResourceVersion() string }](w *ownWrites, book *webappv2.Book, r resource, send func() (T, error)) (T, error) {
	key, uid := cache.MetaObjectToName(book), book.UID
	w.begin(key, uid, r)
	done := false
	defer func() {
		// Also after a panic in send: a write left in flight would hold
		// back the Book's events for good.
		if !done {
			w.failed(key, r)
		}
	}()
	obj, err := send()
	if err != nil {
		return obj, err
	}
	done = true
	w.wrote(key, uid, r, obj.GetResourceVersion())
	return obj, nil
}

// wrap returns next with every write going through ownWrite.
func (w *ownWrites) wrap(next apiWriter) apiWriter { return trackedWriter{next: next, tracker: w} }

// trackedWriter is an apiWriter whose writes the tracker records.
type trackedWriter struct {
	next    apiWriter
	tracker *ownWrites
}

func (t trackedWriter) createConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return ownWrite(t.tracker, book, configMapsResource, func() (*corev1.ConfigMap, error) {
		return t.next.createConfigMap(ctx, book, cm)
	})
}

func (t trackedWriter) updateConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return ownWrite(t.tracker, book, configMapsResource, func() (*corev1.ConfigMap, error) {
		return t.next.updateConfigMap(ctx, book, cm)
	})
}

func (t trackedWriter) updateStatus(ctx context.Context, book *webappv2.Book) (*webappv2.Book, error) {
	return ownWrite(t.tracker, book, booksResource, func() (*webappv2.Book, error) {
		return t.next.updateStatus(ctx, book)
	})
}

// release queues a Book whose event the tracker held back while our write
// was in flight, once the write's answer showed the event was not its
// echo: a live change (handlers.go, enqueue).
func (c *Controller) release(key cache.ObjectName) {
	c.observe(c.enqueue(HandlerEvent{Type: EventReleased, Key: key}, nil))
}

// begin marks a write of r for key as in flight.
func (w *ownWrites) begin(key cache.ObjectName, uid types.UID, r resource) {
	if w.stores[r] == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.record(key, uid)
	b.writes[r] = write{rv: b.writes[r].rv, inFlight: true}
	w.books[key] = b
}

// wrote ends the write begun for key: the API server left the object at rv.
// If the one event heard meanwhile was its echo, the store already has it
// and nothing is left to wait for; any other event heard is released.
func (w *ownWrites) wrote(key cache.ObjectName, uid types.UID, r resource, rv string) {
	if w.stores[r] == nil {
		return
	}
	w.mu.Lock()
	b := w.record(key, uid)
	was := b.writes[r]
	echoed := was.inFlight && !was.heardMore && was.heard == rv
	b.writes[r] = write{rv: newerVersion(was.rv, rv)}
	if echoed {
		b.writes[r].rv = ""
	}
	w.keep(key, b)
	w.mu.Unlock()
	if was.inFlight && was.heard != "" && !echoed {
		w.release(key)
	}
}

// failed ends a write begun for key that the API server did not take, and
// releases any event heard meanwhile.
func (w *ownWrites) failed(key cache.ObjectName, r resource) {
	if w.stores[r] == nil {
		return
	}
	w.mu.Lock()
	b, ok := w.books[key]
	if !ok || !b.writes[r].inFlight {
		w.mu.Unlock()
		return
	}
	heard := b.writes[r].heard != ""
	b.writes[r] = write{rv: b.writes[r].rv}
	w.keep(key, b)
	w.mu.Unlock()
	if heard {
		w.release(key)
	}
}

// isEcho tells whether an informer event of r at resourceVersion rv for
// the Book key needs no sync: it brings back exactly what our last write
// left, or it arrived while a write of r is in flight and is held back for
// the write's answer to judge. An event the Book's deferred sync waits for
// is never an echo.
func (w *ownWrites) isEcho(key cache.ObjectName, r resource, rv string) bool {
	if w.stores[r] == nil || rv == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.books[key]
	if !ok {
		return false
	}
	wr := &b.writes[r]
	if wr.inFlight {
		if wr.heard == "" {
			wr.heard = rv
		} else {
			wr.heardMore = true
		}
		w.books[key] = b
		return true
	}
	if wr.rv != rv {
		return false
	}
	// The store holds what we wrote: handlers hear of an object only after
	// the store has it.
	deferred := b.deferred
	wr.rv, b.deferred = "", false
	w.keep(key, b)
	return !deferred
}

// cacheBehind returns nil when every informer store has reached our writes
// for key (and forgets them), or a *staleCacheError naming the first store
// found behind; the event that brings the write then queues the Book. A
// Book that is gone is forgotten here too, on its last sync: the event of
// its deletion comes after those of our writes.
func (w *ownWrites) cacheBehind(key cache.ObjectName) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.books[key]
	if !ok {
		return nil
	}
	for r, wr := range b.writes {
		if wr.rv == "" {
			continue
		}
		read := w.stores[r].LastStoreSyncResourceVersion()
		if cmp, err := resourceversion.CompareResourceVersion(wr.rv, read); read != "" && err == nil && cmp > 0 {
			b.deferred = true
			w.books[key] = b
			return &staleCacheError{Resource: resource(r), Written: wr.rv, Read: read}
		}
	}
	delete(w.books, key)
	return nil
}

// record returns key's record for uid, a fresh one when there is none or it
// belongs to an earlier Book of the name. The caller holds mu.
func (w *ownWrites) record(key cache.ObjectName, uid types.UID) bookWrites {
	b, ok := w.books[key]
	if !ok || b.uid != uid {
		b = bookWrites{uid: uid}
	}
	return b
}

// keep stores b as key's record while it has anything to wait for. The
// caller holds mu.
func (w *ownWrites) keep(key cache.ObjectName, b bookWrites) {
	if b.pending() {
		w.books[key] = b
	} else {
		delete(w.books, key)
	}
}

// newerVersion returns the newer of two resourceVersions, next when they
// cannot be compared.
func newerVersion(prev, next string) string {
	if cmp, err := resourceversion.CompareResourceVersion(prev, next); prev != "" && err == nil && cmp >= 0 {
		return prev
	}
	return next
}

// staleCacheError says which informer store has yet to show our write.
type staleCacheError struct {
	Resource      resource
	Written, Read string
}

func (e *staleCacheError) Error() string {
	return fmt.Sprintf("%s cache is at resourceVersion %s, behind our write at %s", e.Resource, e.Read, e.Written)
}
