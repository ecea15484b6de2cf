package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/metrics"
)

// notReadyBooks knows since when each Book that is not Ready has been so,
// for the alert on Books that stay not Ready
// (book_controller_not_ready_since_timestamp_seconds,
// manifests/components/prometheus). A Book's time is its Ready=False
// condition's lastTransitionTime, or its creation if it has no Ready
// condition yet, so the figure survives restarts and failovers: the initial
// list syncs every Book again. Whatever the reason, and however the sync
// ends, the Book's status as the API server holds it is what counts.
//
// Cost: an entry (about 100 B) per Book that is not Ready, none for Ready
// ones; a lock and a map lookup per sync. Recomputing the oldest time is
// O(not Ready Books), and only happens when the oldest one leaves.
type notReadyBooks struct {
	mu     sync.Mutex // guards since and oldest; held by workers for one map operation
	since  map[cache.ObjectName]time.Time
	oldest time.Time // the earliest of since; zero when since is empty
}

func newNotReadyBooks() *notReadyBooks {
	n := &notReadyBooks{since: map[cache.ObjectName]time.Time{}}
	n.export()
	return n
}

// observe records the Book's readiness from its status.
func (n *notReadyBooks) observe(key cache.ObjectName, book *webappv1.Book) {
	ready := meta.FindStatusCondition(book.Status.Conditions, ConditionReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionTrue:
		n.forget(key)
	case ready != nil:
		n.set(key, ready.LastTransitionTime.Time)
	default:
		n.set(key, book.CreationTimestamp.Time)
	}
}

func (n *notReadyBooks) set(key cache.ObjectName, since time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, had := n.since[key]
	if had && old.Equal(since) {
		return
	}
	n.since[key] = since
	if had && old.Equal(n.oldest) {
		n.recompute()
	} else if n.oldest.IsZero() || since.Before(n.oldest) {
		n.oldest = since
	}
	n.export()
}

// forget drops a Book that is Ready or gone.
func (n *notReadyBooks) forget(key cache.ObjectName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, had := n.since[key]
	if !had {
		return
	}
	delete(n.since, key)
	if old.Equal(n.oldest) {
		n.recompute()
	}
	n.export()
}

func (n *notReadyBooks) recompute() {
	n.oldest = time.Time{}
	for _, t := range n.since {
		if n.oldest.IsZero() || t.Before(n.oldest) {
			n.oldest = t
		}
	}
}

func (n *notReadyBooks) export() {
	metrics.BooksNotReady.Set(float64(len(n.since)))
	if n.oldest.IsZero() {
		metrics.NotReadySince.Set(0)
		return
	}
	metrics.NotReadySince.Set(float64(n.oldest.Unix()))
}
