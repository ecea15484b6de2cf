package controller

import (
	"fmt"
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
type consistencyStore struct {
	stores map[schema.GroupResource]storeVersion

	mu     sync.Mutex
	owners map[cache.ObjectName]ownerWrites
}

// ownerWrites are the writes made for one Book, identified by its UID so
// that a later Book of the same name starts afresh.
type ownerWrites struct {
	uid     types.UID
	written map[schema.GroupResource]string
}

// newConsistencyStore returns a store that judges each resource's writes by
// the given informer store.
func newConsistencyStore(stores map[schema.GroupResource]storeVersion) *consistencyStore {
	return &consistencyStore{stores: stores, owners: map[cache.ObjectName]ownerWrites{}}
}

// WroteAt records that a write for the Book key (with UID uid) left an
// object of resource at resourceVersion rv. An older rv than one already
// recorded changes nothing; a record of another UID is replaced.
func (s *consistencyStore) WroteAt(key cache.ObjectName, uid types.UID, resource schema.GroupResource, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.owners[key]
	if !ok || w.uid != uid {
		w = ownerWrites{uid: uid, written: map[schema.GroupResource]string{}}
		s.owners[key] = w
	}
	if prev, ok := w.written[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(prev, rv); err == nil && cmp >= 0 {
			return
		}
	}
	w.written[resource] = rv
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
	for resource, written := range w.written {
		store := s.stores[resource]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(written, read); err == nil && cmp > 0 {
			return &staleCacheError{Resource: resource, Written: written, Read: read}
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
