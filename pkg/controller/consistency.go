package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// A sync right after one of our own writes can find the caches without it,
// and acting on that would only waste requests:
//   - The Book cache still holds the version our status write started from.
//     A sync then (the ConfigMap's add event usually comes first) would
//     compute the status again from stale data and get a 409.
//   - The Book and ConfigMap informers have watches of their own, so the
//     event of our status write can overtake the event of the ConfigMap
//     created just before it. A sync in that window would create the
//     ConfigMap again, be told 409 AlreadyExists and read it back: two wasted
//     requests per Book, hundreds per burst with many workers.
//
// Since v1.36 kube-controller-manager's controllers answer this with a
// consistency store (k8s.io/kubernetes pkg/controller/util/consistency, used
// by the ReplicaSet controller): after each write they record, for the
// owner, the resourceVersion the API server gave the written object, and a
// sync goes ahead only once every informer's store has applied the watch
// up to that resourceVersion (client-go's LastStoreSyncResourceVersion).
// resourceVersions of one resource are ordered, so "the store has reached
// what we wrote" needs no clock. consistencyStore is that design, typed for
// this controller's two resources.

// Resources this controller writes, as the consistency store names them.
var (
	booksResource      = webappv1.Resource("books")
	configMapsResource = corev1.Resource("configmaps")
)

// storeVersion is what an informer's store tells about its progress: the
// resourceVersion of the last watch event or list it has applied, or "" when
// client-go cannot say (its AtomicFIFO feature turned off).
type storeVersion interface {
	LastStoreSyncResourceVersion() string
}

// consistencyStore remembers, per Book, the newest resourceVersion this
// controller wrote of each resource, until the informers' stores show it.
// It is safe for concurrent use; the work queue already guarantees that a
// key's WroteAt and EnsureReady never run at the same time.
//
// A record lives from a Book's write until the informers deliver the
// write back (Echo) or, failing that, the Book's next sync. Before echoes
// ended it, that sync came a whole pass over the queue later in a backlog
// and N new Books held up to N records at once; each is still kept small (a
// map slot and one slice of two strings; a map per Book cost about 500
// bytes, docs/benchmark.md).
type consistencyStore struct {
	// resources names the resources judged, and stores holds each one's
	// informer store, at the same index.
	resources []schema.GroupResource
	stores    []storeVersion

	mu     sync.Mutex
	owners map[cache.ObjectName]ownerWrites
}

// ownerWrites are the writes made for one Book, identified by its UID so
// that a later Book of the same name starts afresh.
type ownerWrites struct {
	uid types.UID
	// writes holds each resource's state at its index in
	// consistencyStore.resources.
	writes []writeState
	// deferred is set when a sync found the caches behind these writes and
	// left the Book to the event that brings them (awaitOwnWrite): that
	// event must then requeue the Book, own write or not.
	deferred bool
}

// writeState is what the store knows of our writes of one resource for one
// Book.
type writeState struct {
	// written is the newest resourceVersion written; "" where none was, or
	// where the informer has since delivered it (Echo).
	written string
	// inFlight is set from BeginWrite until WroteAt or WriteFailed. Events
	// heard meanwhile may be the write's own echo, which can overtake the
	// write's response: seen keeps the resourceVersion of the first and
	// seenMore tells whether another came, for WroteAt to judge.
	inFlight bool
	seenMore bool
	seen     string
}

// pending tells whether anything is left to wait for: a write not yet
// delivered, or one still in flight.
func (w ownerWrites) pending() bool {
	return slices.ContainsFunc(w.writes, func(ws writeState) bool { return ws.written != "" || ws.inFlight })
}

// newConsistencyStore returns a store that judges each resource's writes by
// the given informer store.
func newConsistencyStore(stores map[schema.GroupResource]storeVersion) *consistencyStore {
	s := &consistencyStore{owners: map[cache.ObjectName]ownerWrites{}}
	for _, r := range slices.SortedFunc(maps.Keys(stores), func(a, b schema.GroupResource) int {
		return strings.Compare(a.String(), b.String())
	}) {
		s.resources = append(s.resources, r)
		s.stores = append(s.stores, stores[r])
	}
	return s
}

// BeginWrite tells the store that a write of resource for the Book key
// (with UID uid) is about to be sent: until WroteAt or WriteFailed, events
// of that resource for the Book are held back from the queue (Echo), since
// the first of them is likely the write's own echo, arriving before its
// response.
func (s *consistencyStore) BeginWrite(key cache.ObjectName, uid types.UID, resource schema.GroupResource) {
	i := s.index(resource)
	if i < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.record(key, uid)
	w.writes[i].inFlight, w.writes[i].seen, w.writes[i].seenMore = true, "", false
	s.owners[key] = w
}

// WroteAt records that a write for the Book key (with UID uid) left an
// object of resource at resourceVersion rv. An older rv than one already
// recorded changes nothing; a record of another UID is replaced. A resource
// without a store is not recorded: nothing could say when it was reached.
//
// It reports whether the Book must be queued again: an event held back
// while the write was in flight (BeginWrite) turned out not to be its echo.
// When the one event held back was the echo, the write is already in the
// store and nothing is left to wait for.
func (s *consistencyStore) WroteAt(key cache.ObjectName, uid types.UID, resource schema.GroupResource, rv string) (requeue bool) {
	i := s.index(resource)
	if i < 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.record(key, uid)
	ws := &w.writes[i]
	echoed := ws.inFlight && !ws.seenMore && ws.seen == rv
	requeue = ws.inFlight && ws.seen != "" && !echoed
	ws.inFlight, ws.seen, ws.seenMore = false, "", false
	newer := true
	if prev := ws.written; prev != "" {
		if cmp, err := resourceversion.CompareResourceVersion(prev, rv); err == nil && cmp >= 0 {
			newer = false
		}
	}
	switch {
	case echoed:
		// rv is in the store; an older write recorded before it is too.
		ws.written = ""
	case newer:
		ws.written = rv
	}
	s.store(key, w)
	return requeue
}

// WriteFailed ends a write begun with BeginWrite that the API server did not
// take. It reports whether an event was held back meanwhile, so that the
// Book must be queued again.
func (s *consistencyStore) WriteFailed(key cache.ObjectName, resource schema.GroupResource) (requeue bool) {
	i := s.index(resource)
	if i < 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.owners[key]
	if !ok || !w.writes[i].inFlight {
		return false
	}
	requeue = w.writes[i].seen != ""
	w.writes[i] = writeState{written: w.writes[i].written}
	s.store(key, w)
	return requeue
}

// index is resource's index in s.resources, or -1 when the store does not
// judge it (no informer store to say when a write was reached).
func (s *consistencyStore) index(resource schema.GroupResource) int {
	i := slices.Index(s.resources, resource)
	if i < 0 || s.stores[i] == nil {
		return -1
	}
	return i
}

// record returns key's record for uid, a fresh one if there is none or it
// was made for another Book of the same name. The caller holds s.mu.
func (s *consistencyStore) record(key cache.ObjectName, uid types.UID) ownerWrites {
	w, ok := s.owners[key]
	if !ok || w.uid != uid {
		w = ownerWrites{uid: uid, writes: make([]writeState, len(s.resources))}
	}
	return w
}

// store keeps w as key's record while it has anything to wait for, and
// forgets it otherwise. The caller holds s.mu.
func (s *consistencyStore) store(key cache.ObjectName, w ownerWrites) {
	if w.pending() {
		s.owners[key] = w
	} else {
		delete(s.owners, key)
	}
}

// Clear forgets the writes for key, if they were made for uid or uid is "".
func (s *consistencyStore) Clear(key cache.ObjectName, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.owners[key]; ok && (uid == "" || w.uid == uid) {
		delete(s.owners, key)
	}
}

// EnsureReady returns nil when every informer store has reached the
// resourceVersions written for key, and forgets them then; otherwise a
// *staleCacheError naming the first store found behind. Whatever cannot be
// compared (a store that cannot say, a resourceVersion that is not a
// number) counts as reached: the guard only saves requests, so when in doubt
// the sync goes ahead, and the API server's conflict checks keep it correct.
func (s *consistencyStore) EnsureReady(key cache.ObjectName) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.owners[key]
	if !ok {
		return nil
	}
	for i, ws := range w.writes {
		written := ws.written
		if written == "" {
			continue
		}
		read := s.stores[i].LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(written, read); err == nil && cmp > 0 {
			w.deferred = true
			s.owners[key] = w
			return &staleCacheError{Resource: s.resources[i], Written: written, Read: read}
		}
	}
	delete(s.owners, key)
	return nil
}

// Echo tells whether an informer event of resource at resourceVersion rv,
// for the Book key, brings back exactly what our last write of it left, and
// the Book therefore needs no sync for it. The sync that made the write
// already judged that very object: a status write succeeds only on the
// resourceVersion it read, so the Book's spec is what it was synced from,
// and a ConfigMap we created or repaired is the desired one. Any later change
// by anybody comes with a resourceVersion of its own, and is not an echo.
//
// Skipping echoes takes the second sync of every new Book away: in a
// backlog that sync waited a whole pass over the queue, holding a queue
// entry and this record per Book meanwhile. An echo also shows that the
// store has the write (handlers hear of an object only after the store
// holds it), so it is forgotten, and the record with its last write.
//
// The echo can overtake the write's response. An event that arrives while
// a write of its resource is in flight is therefore held back (Echo reports
// true) and judged by WroteAt or WriteFailed, which ask for a requeue when
// it was anything but the echo.
//
// A sync deferred for these writes (EnsureReady failed) waits for exactly
// this event, so then Echo reports false and the event requeues the Book.
func (s *consistencyStore) Echo(key cache.ObjectName, resource schema.GroupResource, rv string) bool {
	i := s.index(resource)
	if i < 0 || rv == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.owners[key]
	if !ok {
		return false
	}
	ws := &w.writes[i]
	if ws.inFlight {
		if ws.seen == "" {
			ws.seen = rv
		} else {
			ws.seenMore = true
		}
		return true
	}
	if ws.written != rv {
		return false
	}
	deferred := w.deferred
	ws.written = ""
	w.deferred = false
	s.store(key, w)
	return !deferred
}

// staleCacheError says which informer store has yet to show one of our
// writes.
type staleCacheError struct {
	Resource      schema.GroupResource
	Written, Read string
}

func (e *staleCacheError) Error() string {
	return fmt.Sprintf("%s cache is at resourceVersion %s, behind our write at %s", e.Resource, e.Read, e.Written)
}
