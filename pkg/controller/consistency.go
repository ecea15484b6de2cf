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
// A record lives from a Book's write until its next sync, which in a
// backlog is a whole pass over the queue later: at N new Books it holds up
// to N records at once, so each is kept small (a map slot and one slice of
// two strings; a map per Book cost about 500 bytes, docs/benchmark.md).
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
	// written is the newest resourceVersion written of each resource, at
	// its index in consistencyStore.resources; "" where none was.
	written []string
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

// WroteAt records that a write for the Book key (with UID uid) left an
// object of resource at resourceVersion rv. An older rv than one already
// recorded changes nothing; a record of another UID is replaced. A resource
// without a store is not recorded: nothing could say when it was reached.
func (s *consistencyStore) WroteAt(key cache.ObjectName, uid types.UID, resource schema.GroupResource, rv string) {
	i := slices.Index(s.resources, resource)
	if i < 0 || s.stores[i] == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.owners[key]
	if !ok || w.uid != uid {
		w = ownerWrites{uid: uid, written: make([]string, len(s.resources))}
	}
	if prev := w.written[i]; prev != "" {
		if cmp, err := resourceversion.CompareResourceVersion(prev, rv); err == nil && cmp >= 0 {
			return
		}
	}
	w.written[i] = rv
	s.owners[key] = w
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
	for i, written := range w.written {
		if written == "" {
			continue
		}
		read := s.stores[i].LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(written, read); err == nil && cmp > 0 {
			return &staleCacheError{Resource: s.resources[i], Written: written, Read: read}
		}
	}
	delete(s.owners, key)
	return nil
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
